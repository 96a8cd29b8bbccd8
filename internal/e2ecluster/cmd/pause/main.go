// Command pause is the pod sandbox's process for hack/cluster-up.sh's node:
// it holds the pod's namespaces open until the runtime stops it. The node
// reaches no registry, so registry.k8s.io/pause is out of reach; this is the
// same contract (sleep until SIGINT or SIGTERM, exit 0, reap orphans when it
// is PID 1 of a shared PID namespace) in Go, built into an image by
// cmd/nodeimage.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		// A zombie whose parent died is ours when we are PID 1.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
