// Package runtime is a stub of github.com/writeonce/wo/runtime with the
// signatures the analyzer checks.
package runtime

import (
	"context"
	"time"
)

type Fiber struct{ id uint64 }

type Runtime struct{ n int }

type Receiver[M any] interface{ Receive(f *Fiber, msg M) }

type actorCell[M any] struct{ q []M }

type Addr[M any] struct{ c *actorCell[M] }

type replyWaiter[T any] struct{ v T }

type Reply[T any] struct{ w *replyWaiter[T] }

func (r Reply[T]) Send(f *Fiber, v T) {}

func Spawn[M any](f *Fiber, r Receiver[M]) Addr[M] { return Addr[M]{} }

func SpawnKeyed[M any](f *Fiber, key string, r Receiver[M]) Addr[M] { return Addr[M]{} }

func SpawnOn[M any](f *Fiber, i int, r Receiver[M]) Addr[M] { return Addr[M]{} }

func Send[M any](f *Fiber, to Addr[M], msg M) {}

func Post[M any](rt *Runtime, to Addr[M], msg M) error { return nil }

func Ask[M, T any](f *Fiber, to Addr[M], timeout time.Duration, mk func(Reply[T]) M) (T, error) {
	var zero T
	return zero, nil
}

func Call[M, T any](ctx context.Context, rt *Runtime, to Addr[M], mk func(Reply[T]) M) (T, error) {
	var zero T
	return zero, nil
}
