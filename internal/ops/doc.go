// Package ops is the worker's ops HTTP server (port 9090 in a pod):
//
//	/healthz        200 as soon as the process serves, also during WAL recovery
//	/readyz         200 once the database has recovered and the services serve;
//	                503 while starting and while draining (body: the state),
//	                and while the raft member is joining ("joining: waiting to
//	                be added to the group as <id>"), removed or stopped
//	/admin/         the admin API (package admin; its own token, admin.token_file)
//	/metrics        Prometheus: wo_* runtime, per-shard backend and database
//	                metrics, plus the Go and process collectors
//	/debug/runtime  JSON: readiness, backend selection, runtime.Stats, dbowner.Stats,
//	                the raft member's view of the group (as GET /admin/cluster)
//	/debug/pprof/   the standard pprof handlers
//
// The handlers are ordinary goroutines and never touch shard state. They need
// no runtime.Call either: runtime.Runtime.Stats and dbowner.DB.Stats read
// atomic counters (the database's are documented as readable from anywhere),
// and the metrics collector reads them at scrape time instead of mirroring
// them, so the shards pay nothing for metrics. The raft member's status is
// the exception: it lives on the owner shard, so a scrape and
// /debug/runtime ask for it through the admin API's bridge actor, waiting at
// most a second (a member that does not answer is left out of that scrape).
//
// Metrics:
//
//	wo_ready                                 gauge   1 when ready
//	wo_build_info{version,commit,goversion}  gauge   always 1 (internal/buildinfo; `worker --version`)
//	wo_runtime_info{backend,reason,shards}   gauge   always 1
//	wo_runtime_shards                        gauge
//	wo_runtime_dropped_messages_total        counter
//	wo_runtime_actor_deaths_total            counter
//	wo_runtime_panics_total                  counter
//	wo_runtime_actors_spawned_total          counter
//	wo_runtime_wake_writes_total             counter
//	wo_runtime_watchdog_reports_total        counter
//	wo_shard_cpu{shard}                      gauge   pinned CPU or -1
//	wo_shard_backend_{syscalls,enters,submitted,completed,wake_writes,wake_drains}_total{shard}
//	wo_shard_run_queue{shard}                gauge   runnable fibers at the last tick's start
//	wo_shard_fibers{shard}                   gauge   live fibers (pooled ones not counted)
//	wo_shard_actors{shard}                   gauge   actors placed on the shard, not dead
//	wo_shard_inbox_depth{shard}              gauge   cross-shard items waiting
//	wo_shard_reductions_total{shard}         counter reductions spent
//	wo_shard_slice_overruns_total{shard}     counter slices past the watchdog threshold
//	wo_db_commits_total, wo_db_group_commits_total, wo_db_journaled_group_commits_total,
//	wo_db_failed_commits_total, wo_db_snapshots_total, wo_db_group_commit_bytes_total   counters
//	wo_db_last_lsn, wo_db_recovered_records, wo_db_max_group_commit_size   gauges
//	wo_peer_{frames_sent,frames_received,messages_sent,messages_dropped,beats_sent,beats_received,
//	  unknown_group_messages,connections_refused,dials,dial_failures,snapshots_sent,snapshots_received}_total
//	                                         counters of the peer transport (a member with peers)
//	wo_wal_fsync_duration_seconds            histogram  one group's WAL write + fdatasync
//	wo_wal_commits_per_fsync                 histogram  commits made durable by one group
//	wo_raft_info{member,state,role,leader}   gauge   always 1: member and leader IDs (hex), state, role
//	wo_raft_term, wo_raft_commit_index, wo_raft_applied_index   gauges
//	wo_raft_voters, wo_raft_reachable_voters gauges  reachable below a majority: no quorum
//	wo_raft_is_leader                        gauge   1 on the leader
//
// The shard gauges are published by each shard once per tick (a few atomic
// stores), so they are as fresh as the shard's last tick.
//
// The two histograms are fed by the hook Server.WAL returns, passed to the
// database as dbowner.Options.OnGroupCommit. Other packages register their
// collectors on the same registry: the data plane's wo_http_* (package
// httpd) and the records API's wo_db_operation_duration_seconds (package
// records).
package ops
