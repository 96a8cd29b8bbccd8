package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/transport"
)

// clusterOptions turns the replication settings into the database's
// Cluster options: the member ID from member.id in the data dir, and
// whether this member bootstraps the group or joins it.
//
// The rule (docs/replication.md, "Bootstrap"): a member whose ordinal is
// in cluster.peers, with cluster.state new and no member.id yet (an empty
// data dir), bootstraps the group with incarnation 1; a member not listed
// in cluster.peers, or with cluster.state existing, joins: it takes a new
// incarnation and waits until the group adds it. A member that has a
// member.id restarts from its log (the rule no longer matters). With no
// cluster.peers and cluster.state new, the worker is a one-member group
// and no peer port is opened.
//
// The peer TLS files, when set, are returned too: the admin API reports
// what they hold (GET /admin/cluster's peer_tls).
func clusterOptions(cfg config.Config, log *slog.Logger) (dbowner.Cluster, *transport.TLSFiles, error) {
	var c dbowner.Cluster
	var files *transport.TLSFiles
	c.RequestTimeout = cfg.RequestTimeout
	c.ReplicationFactor = cfg.ReplicationFactor
	single := len(cfg.Peers) == 0 && cfg.ClusterState == "new"
	ord := cfg.Ordinal
	if ord < 0 {
		host, _ := os.Hostname()
		n, err := identity.OrdinalFromHostname(host)
		switch {
		case err == nil:
			ord = n
		case single:
			ord = 0 // a single worker on a laptop: no pod ordinal needed
		default:
			return c, files, fmt.Errorf("cluster.ordinal is not set and the host name %q has no -N suffix: %w", host, err)
		}
	}
	listed := slices.ContainsFunc(cfg.Peers, func(p config.Peer) bool { return p.Ordinal == ord })
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return c, files, fmt.Errorf("data dir: %w", err)
	}
	_, had, err := identity.Load(cfg.DataDir)
	if err != nil {
		return c, files, err
	}
	bootstrap := single || (listed && cfg.ClusterState == "new")
	m, created, err := identity.Ensure(cfg.DataDir, ord, bootstrap, time.Now())
	if err != nil {
		return c, files, err
	}
	c.ID = m.ID()
	if single {
		log.Info("worker: a one-member group (no cluster.peers)", "member", fmt.Sprintf("%x", c.ID))
		return c, files, nil
	}
	c.Peers = map[uint64]string{}
	for _, p := range cfg.Peers {
		c.Peers[identity.BootstrapID(p.Ordinal)] = p.Addr
	}
	c.Join = !bootstrap
	c.Nonce = m.Nonce
	if c.Nonces, err = identity.OpenBook(cfg.DataDir); err != nil {
		return c, files, err
	}
	c.PeerAddr = cfg.PeerAddr
	c.DialMap = cfg.PeerDialMap
	if cfg.PeerCert != "" {
		files, err = transport.OpenTLS(cfg.PeerCert, cfg.PeerKey, cfg.PeerCA)
		if err != nil {
			return c, nil, err
		}
		c.TLS = files.Config()
	}
	state := "restarts from its log"
	switch {
	case created && bootstrap:
		state = "bootstraps the group (cluster.state new, listed in cluster.peers, empty data dir)"
	case created:
		state = "joins the group and waits to be added (not listed in cluster.peers, or cluster.state existing)"
	case !had:
		state = "restarts"
	}
	log.Info("worker: raft member", "member", fmt.Sprintf("%x", c.ID), "ordinal", ord, "incarnation", m.Incarnation,
		"peers", len(cfg.Peers), "tls", c.TLS != nil, "state", state)
	return c, files, nil
}
