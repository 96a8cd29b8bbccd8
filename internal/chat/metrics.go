package chat

import "github.com/prometheus/client_golang/prometheus"

// Metrics. The collector reads the service's atomic counters at scrape
// time: nothing on a connection's or a room's path pays for metrics.

var chatMetrics = []struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(Stats) int64
}{
	{prometheus.NewDesc("wo_chat_connections", "Chat connections open now (TCP and WebSocket).", nil, nil),
		prometheus.GaugeValue, func(s Stats) int64 { return s.Conns }},
	{prometheus.NewDesc("wo_chat_connections_total", "Chat connections accepted.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.Accepted }},
	{prometheus.NewDesc("wo_chat_rooms", "Chat rooms in the directory (made by /join since the worker started).", nil, nil),
		prometheus.GaugeValue, func(s Stats) int64 { return s.Rooms }},
	{prometheus.NewDesc("wo_chat_messages_in_total", "Chat messages clients sent to their room.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.Received }},
	{prometheus.NewDesc("wo_chat_messages_out_total", "Chat events written to clients (messages, replays, notices, errors).", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.Delivered }},
	{prometheus.NewDesc("wo_chat_slow_consumers_cut_total", "Chat connections cut off because their outbound queue was full.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.SlowCut }},
	{prometheus.NewDesc("wo_chat_flood_cut_total", "Chat connections cut off for flooding.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.FloodCut }},
	{prometheus.NewDesc("wo_chat_bad_input_total", "Chat lines and frames refused (malformed, over the rate limit).", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.BadInput }},
	{prometheus.NewDesc("wo_chat_history_pruned_total", "Chat history records deleted by retention (chat.retain_count, chat.retain_age).", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.Pruned }},
	{prometheus.NewDesc("wo_chat_history_migrated_total", "Chat history records moved from the message ids of before partitions to ids tagged with their room.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.Migrated }},
	{prometheus.NewDesc("wo_chat_auth_failures_total", "Chat TCP connections refused for a missing or wrong token.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.AuthFailed }},
	{prometheus.NewDesc("wo_chat_nick_refused_total", "Chat /nick requests refused: the nick was held by another connection.", nil, nil),
		prometheus.CounterValue, func(s Stats) int64 { return s.NickTaken }},
}

type collector struct{ s *Service }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range chatMetrics {
		ch <- m.desc
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range chatMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(st)))
	}
}

// Collectors are the chat's metrics (wo_chat_*), for the worker's /metrics
// registry.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{collector{s}}
}
