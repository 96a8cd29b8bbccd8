package operator_test

import (
	"context"
	"time"
)

// kubeletLoop is the loop of the tests' stand-in kubelets (fakeGroup, which
// fakes the pods, and procKubelet, which runs real worker processes): a
// pass every period, bounded by the test's lifetime.
type kubeletLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startKubeletLoop runs pass every period until stop.
func startKubeletLoop(period time.Duration, pass func(ctx context.Context)) *kubeletLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &kubeletLoop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pass(ctx)
		}
	}()
	return l
}

// stop ends the loop and waits for a pass under way to return.
func (l *kubeletLoop) stop() {
	l.cancel()
	<-l.done
}
