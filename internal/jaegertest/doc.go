// Package jaegertest is the Jaeger of wo's trace tests: the all-in-one
// configuration they run it with (OTLP/gRPC in, memory storage, the query
// API), and a client of its query API with the JSON model its UI reads.
// hack/e2etraces runs Jaeger as a process beside a worker;
// internal/e2ecluster runs it as a pod on the real node. One configuration
// and one reader serve both, so the two tests read traces the same way.
package jaegertest
