package ops

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/buildinfo"
	"github.com/writeonce/wo/replication/transport"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descReady      = desc("wo_ready", "1 when the worker is ready (database recovered, services serving), 0 while starting or draining.")
	descInfo       = desc("wo_runtime_info", "The runtime's I/O backend, why the probe chose it, and the shard count; always 1.", "backend", "reason", "shards")
	descShards     = desc("wo_runtime_shards", "Number of shards.")
	descDropped    = desc("wo_runtime_dropped_messages_total", "Messages sent to dead actors, the zero address, or a stopping runtime.")
	descDeaths     = desc("wo_runtime_actor_deaths_total", "Actors whose Receive panicked.")
	descPanics     = desc("wo_runtime_panics_total", "Panics logged, in fibers and actors.")
	descSpawned    = desc("wo_runtime_actors_spawned_total", "Actors spawned.")
	descWakeWrites = desc("wo_runtime_wake_writes_total", "Cross-shard wake-ups written to a sleeping shard.")
	descWatchdog   = desc("wo_runtime_watchdog_reports_total", "Scheduler slices that ran past the watchdog threshold without a safepoint.")
	descShardCPU   = desc("wo_shard_cpu", "The CPU a shard is pinned to, or -1.", "shard")
	descSyscalls   = desc("wo_shard_backend_syscalls_total", "Syscalls made by a shard's I/O backend.", "shard")
	descEnters     = desc("wo_shard_backend_enters_total", "io_uring_enter or epoll_wait calls of a shard's backend.", "shard")
	descSubmitted  = desc("wo_shard_backend_submitted_total", "Operations a shard's backend started.", "shard")
	descCompleted  = desc("wo_shard_backend_completed_total", "Completions a shard's backend returned.", "shard")
	descBEWake     = desc("wo_shard_backend_wake_writes_total", "eventfd writes to wake a shard.", "shard")
	descBEDrain    = desc("wo_shard_backend_wake_drains_total", "eventfd reads by a shard.", "shard")
	descRunQueue   = desc("wo_shard_run_queue", "Fibers runnable at the start of the shard's last tick.", "shard")
	descFibers     = desc("wo_shard_fibers", "Live fibers on the shard (finished ones kept for reuse not counted).", "shard")
	descActors     = desc("wo_shard_actors", "Actors placed on the shard and not dead.", "shard")
	descInbox      = desc("wo_shard_inbox_depth", "Cross-shard items waiting in the shard's inbox.", "shard")
	descReductions = desc("wo_shard_reductions_total", "Reductions spent by the shard's slices.", "shard")
	descOverruns   = desc("wo_shard_slice_overruns_total", "The shard's slices that ran past the watchdog threshold without a safepoint.", "shard")
	descCommits    = desc("wo_db_commits_total", "Acknowledged (durable) write transactions.")
	descGroups     = desc("wo_db_group_commits_total", "Group commits: one WAL write each, and one fdatasync each unless a shard journal made it durable with other partitions' (wo_db_journaled_group_commits_total).")
	descJournaled  = desc("wo_db_journaled_group_commits_total", "Group commits of partitions made durable together by their shard's journal: one journal write and one fdatasync for all of a batch.")
	descFailed     = desc("wo_db_failed_commits_total", "Commits failed by the WAL (no space, fatal).")
	descSnapshots  = desc("wo_db_snapshots_total", "Snapshots taken.")
	descGroupBytes = desc("wo_db_group_commit_bytes_total", "Bytes written by group commits.")
	descLastLSN    = desc("wo_db_last_lsn", "Sequence number of the last durable WAL record.")
	descRecovered  = desc("wo_db_recovered_records", "WAL records replayed at open.")
	descMaxGroup   = desc("wo_db_max_group_commit_size", "The largest number of commits made durable by one fsync.")
	descRaftInfo   = desc("wo_raft_info", "This raft member: its ID, state (joining, member, removed, stopped), role and the leader it knows (ID 0: none); always 1.", "member", "state", "role", "leader")
	allDescriptors = []*prometheus.Desc{descReady, descInfo, descShards, descDropped, descDeaths, descPanics, descSpawned, descWakeWrites, descWatchdog, descShardCPU, descSyscalls, descEnters, descSubmitted, descCompleted, descBEWake, descBEDrain, descRunQueue, descFibers, descActors, descInbox, descReductions, descOverruns, descCommits, descGroups, descJournaled, descFailed, descSnapshots, descGroupBytes, descLastLSN, descRecovered, descMaxGroup}
)

var _ prometheus.Collector = (*collector)(nil)

// buildInfoGauge is wo_build_info{version,commit,goversion} 1: which build
// runs, as `worker --version` says it (package buildinfo).
func buildInfoGauge(info buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "wo_build_info",
		Help:        "The running build: its version, git commit and Go toolchain; always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}

// raftGauges are the member's wo_raft_* gauges after wo_raft_info, each a
// number of its view of the group (GET /admin/cluster).
var raftGauges = []struct {
	desc  *prometheus.Desc
	value func(cl *adminapi.Cluster) float64
}{
	{desc("wo_raft_term", "The member's raft term."), func(cl *adminapi.Cluster) float64 { return float64(cl.Term) }},
	{desc("wo_raft_commit_index", "The highest log index the member knows committed."), func(cl *adminapi.Cluster) float64 { return float64(cl.Commit) }},
	{desc("wo_raft_applied_index", "The highest log index applied to the member's database."), func(cl *adminapi.Cluster) float64 { return float64(cl.Applied) }},
	{desc("wo_raft_voters", "Voters in the group's configuration."), func(cl *adminapi.Cluster) float64 { return float64(cl.Voters) }},
	{desc("wo_raft_reachable_voters", "Voters the member heard from within an election timeout, itself included (below a majority: no quorum)."),
		func(cl *adminapi.Cluster) float64 { return float64(cl.Reachable) }},
	{desc("wo_raft_is_leader", "1 when this member is the leader."), func(cl *adminapi.Cluster) float64 {
		if cl.Leader != 0 && cl.Leader == cl.Self {
			return 1
		}
		return 0
	}},
}

// peerCounters are the member's wo_peer_* counters, each one of its peer
// transport's Stats (dbowner.DB.PeerStats).
var peerCounters = []struct {
	desc  *prometheus.Desc
	value func(s *transport.Stats) *atomic.Int64
}{
	{desc("wo_peer_frames_sent_total", "Frames the peer transport wrote to other members (a frame carries many messages)."), func(s *transport.Stats) *atomic.Int64 { return &s.FramesSent }},
	{desc("wo_peer_frames_received_total", "Frames the peer transport read from other members."), func(s *transport.Stats) *atomic.Int64 { return &s.FramesReceived }},
	{desc("wo_peer_messages_sent_total", "Raft messages sent to other members, beats included."), func(s *transport.Stats) *atomic.Int64 { return &s.MessagesSent }},
	{desc("wo_peer_messages_dropped_total", "Raft messages dropped: a full queue, an unknown or unreachable peer (raft sends again what matters)."), func(s *transport.Stats) *atomic.Int64 { return &s.MessagesDropped }},
	{desc("wo_peer_beats_sent_total", "Heartbeats and their answers sent coalesced, as beats (a few bytes each in one frame for every group)."), func(s *transport.Stats) *atomic.Int64 { return &s.BeatsSent }},
	{desc("wo_peer_beats_received_total", "Heartbeats and their answers received as beats."), func(s *transport.Stats) *atomic.Int64 { return &s.BeatsReceived }},
	{desc("wo_peer_unknown_group_messages_total", "Messages for a raft group this member has not joined (a partition still opening), dropped."), func(s *transport.Stats) *atomic.Int64 { return &s.UnknownGroup }},
	{desc("wo_peer_connections_refused_total", "Inbound peer connections closed: a bad hello or frame, a removed member, a message naming another sender."), func(s *transport.Stats) *atomic.Int64 { return &s.ConnsRefused }},
	{desc("wo_peer_dials_total", "Connections dialled to other members."), func(s *transport.Stats) *atomic.Int64 { return &s.Dials }},
	{desc("wo_peer_dial_failures_total", "Dials to other members that failed."), func(s *transport.Stats) *atomic.Int64 { return &s.DialFailures }},
	{desc("wo_peer_snapshots_sent_total", "Raft snapshots streamed to other members."), func(s *transport.Stats) *atomic.Int64 { return &s.SnapshotsSent }},
	{desc("wo_peer_snapshots_received_total", "Raft snapshots received from other members."), func(s *transport.Stats) *atomic.Int64 { return &s.SnapshotsIn }},
}

// collector reads the runtime's and the database's atomic Stats at scrape
// time: no counter is mirrored, so nothing on a shard's hot path pays for
// metrics.
type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescriptors {
		ch <- d
	}
	ch <- descRaftInfo
	for _, g := range raftGauges {
		ch <- g.desc
	}
	for _, p := range peerCounters {
		ch <- p.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	ready := 0.0
	if ok, _ := c.s.ready(); ok {
		ready = 1
	}
	gauge(descReady, ready)
	if rt := c.s.rt.Load(); rt != nil {
		st := rt.Stats()
		gauge(descInfo, 1, string(st.Backend), st.BackendReason, strconv.Itoa(st.Shards))
		gauge(descShards, float64(st.Shards))
		counter(descDropped, st.Dropped)
		counter(descDeaths, st.ActorDeaths)
		counter(descPanics, st.Panics)
		counter(descSpawned, st.ActorsSpawned)
		counter(descWakeWrites, st.WakeWrites)
		counter(descWatchdog, st.WatchdogReports)
		for _, sh := range st.PerShard {
			id := strconv.Itoa(sh.ID)
			gauge(descShardCPU, float64(sh.CPU), id)
			counter(descSyscalls, sh.Backend.Syscalls, id)
			counter(descEnters, sh.Backend.Enters, id)
			counter(descSubmitted, sh.Backend.Submitted, id)
			counter(descCompleted, sh.Backend.Completed, id)
			counter(descBEWake, sh.Backend.WakeWrites, id)
			counter(descBEDrain, sh.Backend.WakeDrains, id)
			gauge(descRunQueue, float64(sh.RunQueue), id)
			gauge(descFibers, float64(sh.Fibers), id)
			gauge(descActors, float64(sh.Actors), id)
			gauge(descInbox, float64(sh.Inbox), id)
			counter(descReductions, sh.Reductions, id)
			counter(descOverruns, sh.Overruns, id)
		}
	}
	if db := c.s.db.Load(); db != nil {
		st := db.Stats()
		counter(descCommits, st.Commits)
		counter(descGroups, st.Groups)
		counter(descJournaled, st.Journaled)
		counter(descFailed, st.Failed)
		counter(descSnapshots, st.Snapshots)
		counter(descGroupBytes, st.GroupBytes)
		gauge(descLastLSN, float64(st.LastLSN))
		gauge(descRecovered, float64(st.Recovered))
		gauge(descMaxGroup, float64(st.MaxGroup))
		if ps := db.PeerStats(); ps != nil {
			for _, p := range peerCounters {
				counter(p.desc, uint64(p.value(ps).Load()))
			}
		}
	}
	// The raft gauges cost one call into the runtime per scrape (the
	// member's status lives on its shard), bounded by statusWait; a
	// member that does not answer in time is left out of this scrape.
	if cl := c.s.cluster(); cl != nil {
		gauge(descRaftInfo, 1, cl.Self.String(), cl.State, cl.Role, cl.Leader.String())
		for _, g := range raftGauges {
			gauge(g.desc, g.value(cl))
		}
	}
}

// WALMetrics are the group commit's histograms, fed by dbowner's
// OnGroupCommit hook on the owner shard (Observe is atomic: the shard pays
// no lock).
type WALMetrics struct {
	fsync   prometheus.Histogram
	commits prometheus.Histogram
}

// WAL registers the group-commit histograms and returns the hook to pass
// as dbowner.Options.OnGroupCommit.
func (s *Server) WAL() func(commits int, writeSync time.Duration) {
	m := &WALMetrics{
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "wo_wal_fsync_duration_seconds",
			Help:    "Time of one group commit's WAL write and fdatasync.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "wo_wal_commits_per_fsync",
			Help:    "Commits made durable by one group commit (one WAL write and fdatasync).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
	}
	s.reg.MustRegister(m.fsync, m.commits)
	return func(commits int, writeSync time.Duration) {
		m.fsync.Observe(writeSync.Seconds())
		m.commits.Observe(float64(commits))
	}
}
