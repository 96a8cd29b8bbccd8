package move

import "github.com/writeonce/wo/runtime"

type Value struct {
	N    int
	Name string
}

type Batch struct {
	N     int
	Items []string
}

type Nested struct {
	B     Batch
	Count int
}

type Handle struct {
	Reply runtime.Reply[int]
	N     int
}

func use(args ...any) {}

func useAfter(f *runtime.Fiber, a runtime.Addr[Batch]) {
	b := Batch{Items: []string{"x"}}
	runtime.Send(f, a, b) // want `WO-E222`
	use(b)                // want `WO-E223: b used after it was sent \(line 29\): a sent message is moved to the receiver`
}

func fieldUse(f *runtime.Fiber, a runtime.Addr[Batch]) {
	b := Batch{Items: []string{"x"}}
	runtime.Send(f, a, b) // want `WO-E222`
	b.Items[0] = "y"      // want `WO-E223: b used after it was sent`
}

func reassigned(f *runtime.Fiber, a runtime.Addr[Batch]) {
	b := Batch{Items: []string{"x"}}
	runtime.Send(f, a, b) // want `WO-E222`
	b = Batch{}
	use(b)
}

func reassignedField(f *runtime.Fiber, a runtime.Addr[Batch]) {
	b := Batch{Items: []string{"x"}}
	runtime.Send(f, a, b) // want `WO-E222`
	b.Items = nil         // a fresh slice in the sender's copy
	b.N = 2
	use(b)
}

func appendAfter(f *runtime.Fiber, a runtime.Addr[Batch]) {
	b := Batch{Items: []string{"x"}}
	runtime.Send(f, a, b)          // want `WO-E222`
	b.Items = append(b.Items, "y") // want `WO-E223: b used after it was sent`
}

func valueOnly(f *runtime.Fiber, a runtime.Addr[Value]) {
	v := Value{N: 1}
	runtime.Send(f, a, v)
	v.N++
	use(v)
}

func handleOnly(f *runtime.Fiber, a runtime.Addr[Handle], r runtime.Reply[int]) {
	h := Handle{Reply: r}
	runtime.Send(f, a, h)
	use(h)
}

func literal(f *runtime.Fiber, a runtime.Addr[Batch]) {
	items := []string{"x"}
	n := 1
	runtime.Send(f, a, Batch{N: n, Items: items}) // want `WO-E222`
	use(n)
	items[0] = "z" // want `WO-E223: items used after it was sent`
}

func sibling(f *runtime.Fiber, a runtime.Addr[Batch], nest Nested) {
	runtime.Send(f, a, nest.B) // want `WO-E222`
	use(nest.Count)
	use(nest.B.N)     // a value field of the sent part: a harmless read
	use(nest.B.Items) // want `WO-E223: nest.B used after it was sent`
}

func sentTwice(f *runtime.Fiber, a, c runtime.Addr[Batch], b Batch) {
	runtime.Send(f, a, b) // want `WO-E222`
	runtime.Send(f, c, b) // want `WO-E222` `WO-E223: b used after it was sent`
}

func earlyReturn(f *runtime.Fiber, a runtime.Addr[Batch], b Batch, cond bool) {
	if cond {
		runtime.Send(f, a, b) // want `WO-E222`
		return
	}
	use(b)
}

func afterIf(f *runtime.Fiber, a runtime.Addr[Batch], b Batch, cond bool) {
	if cond {
		runtime.Send(f, a, b) // want `WO-E222`
	}
	use(b) // want `WO-E223: b used after it was sent`
}

func inBranch(f *runtime.Fiber, a runtime.Addr[Batch], b Batch, cond bool) {
	runtime.Send(f, a, b) // want `WO-E222`
	if cond {
		b = Batch{} // only on this path
	}
	use(b) // want `WO-E223: b used after it was sent`
}

func closure(f *runtime.Fiber, a runtime.Addr[Batch], b Batch) {
	runtime.Send(f, a, b)  // want `WO-E222`
	g := func() { use(b) } // want `WO-E223: b used after it was sent`
	g()
}

func pointer(f *runtime.Fiber, a runtime.Addr[*Value], p *Value) {
	runtime.Send(f, a, p) // want `WO-E222`
	p.N = 3               // want `WO-E223: p used after it was sent`
}

func postFailed(rt *runtime.Runtime, a runtime.Addr[Batch], b Batch) {
	if err := runtime.Post(rt, a, b); err != nil { // want `WO-E222`
		use(b) // the post failed: b was not moved
	}
}

func postAfter(rt *runtime.Runtime, a runtime.Addr[Batch], b Batch) {
	_ = runtime.Post(rt, a, b) // want `WO-E222`
	use(b.Items)               // want `WO-E223: b used after it was sent`
}

func deferred(f *runtime.Fiber, a runtime.Addr[Batch], b Batch) {
	defer runtime.Send(f, a, b) // want `WO-E222`
	use(b)
}

func loop(f *runtime.Fiber, a runtime.Addr[Batch], bs []Batch) {
	for _, b := range bs {
		use(b)                // back edge: not reported (documented)
		runtime.Send(f, a, b) // want `WO-E222`
	}
}

var global Batch

func globalVar(f *runtime.Fiber, a runtime.Addr[Batch]) {
	runtime.Send(f, a, global) // want `WO-E222`
	use(global)                // not a local: not tracked
}

func insideFuncLit(f *runtime.Fiber, a runtime.Addr[Batch], b Batch) {
	func() {
		runtime.Send(f, a, b) // want `WO-E222`
	}()
	use(b) // the literal body ends the search (documented)
}

type Two struct {
	A []int
	B map[string]int
	N int
}

func partlyFresh(f *runtime.Fiber, a runtime.Addr[Two], t Two) {
	runtime.Send(f, a, t) // want `WO-E222`
	t.A = nil
	use(t.N, t.A)
	use(t) // want `WO-E223: t used after it was sent`
}

func allFresh(f *runtime.Fiber, a runtime.Addr[Two], t Two) {
	runtime.Send(f, a, t) // want `WO-E222`
	t.A = nil
	t.B = map[string]int{}
	use(t)
}

type Outer struct {
	Two
	Extra int
}

func promoted(f *runtime.Fiber, a runtime.Addr[Outer], o Outer) {
	runtime.Send(f, a, o) // want `WO-E222`
	use(o.Extra, o.N)
	o.B["k"] = 1 // want `WO-E223: o used after it was sent`
}

func indexUse(f *runtime.Fiber, a runtime.Addr[[]int], s []int, other []int) {
	runtime.Send(f, a, s) // want `WO-E222`
	other[0] = 1
	use(other[len(s)]) // want `WO-E223: s used after it was sent`
}

func opAssign(f *runtime.Fiber, a runtime.Addr[Two], t Two) {
	runtime.Send(f, a, t) // want `WO-E222`
	t.N += 1
	t.B["x"] += 1 // want `WO-E223: t used after it was sent`
}

func switchUse(f *runtime.Fiber, a runtime.Addr[Batch], b Batch, k int) {
	runtime.Send(f, a, b) // want `WO-E222`
	switch k {
	case 1:
		b = Batch{}
		use(b)
	case 2:
		use(b.Items) // want `WO-E223: b used after it was sent`
	}
}
