package sendcheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// RuntimePath is the import path of the wo runtime whose send functions the
// analyzer checks.
const RuntimePath = "github.com/writeonce/wo/runtime"

// Analyzer reports messages that carry mutable shared references (WO-E222)
// and uses of a sent message after the send (WO-E223).
var Analyzer = &analysis.Analyzer{
	Name:      "wosend",
	Doc:       "check wo actor messages: no mutable shared references across shards (WO-E222), no use after send (WO-E223)",
	URL:       "https://github.com/writeonce/wo/tree/main/analysis/sendcheck",
	Requires:  []*analysis.Analyzer{inspect.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(shardSafe)},
}

// Directive marks a type declaration whose values may cross shards although
// they hold references (a handle such as a database client): write it on a
// line of its own in the type's doc comment.
const Directive = "//wo:shardsafe"

// shardSafe is the fact exported for a type declared with Directive.
type shardSafe struct{}

func (*shardSafe) AFact()         {}
func (*shardSafe) String() string { return "shardsafe" }

// exportDirectives exports a shardSafe fact for every type of the package
// declared with Directive.
func exportDirectives(pass *analysis.Pass) {
	has := func(cg *ast.CommentGroup) bool {
		if cg == nil {
			return false
		}
		for _, c := range cg.List {
			if strings.TrimSpace(c.Text) == Directive {
				return true
			}
		}
		return false
	}
	for _, file := range pass.Files {
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if !has(ts.Doc) && !(len(gd.Specs) == 1 && has(gd.Doc)) {
					continue
				}
				if obj, ok := pass.TypesInfo.Defs[ts.Name].(*types.TypeName); ok {
					pass.ExportObjectFact(obj, new(shardSafe))
				}
			}
		}
	}
}

// sendFuncs maps the checked runtime functions to the index of their message
// argument, or -1 when the message is built by an mk function (Ask, Call).
var sendFuncs = map[string]int{
	"Send": 2,
	"Post": 2,
	"Ask":  -1,
	"Call": -1,
}

func run(pass *analysis.Pass) (any, error) {
	exportDirectives(pass)
	w := walker{pass: pass}
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.WithStack([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if !push {
			return true
		}
		call := n.(*ast.CallExpr)
		fn, ok := typeutil.Callee(pass.TypesInfo, call).(*types.Func)
		if !ok || fn.Pkg() == nil || fn.Pkg().Path() != RuntimePath {
			return true
		}
		if sig, _ := fn.Type().(*types.Signature); sig == nil || sig.Recv() != nil {
			return true // a method such as Reply.Send
		}
		msgArg, ok := sendFuncs[fn.Name()]
		if !ok {
			return true
		}
		m := messageType(pass.TypesInfo, call)
		if m == nil {
			return true
		}
		refs := w.mutableRefs(m)
		if len(refs) == 0 {
			return true
		}
		r := refs[0]
		d := analysis.Diagnostic{
			Pos: call.Lparen,
			End: call.End(),
			Message: fmt.Sprintf("WO-E222: message type %s may cross shards but carries a mutable reference at %s (%s); send a copy or a value type",
				typeString(pass, m), r.pathString(), typeString(pass, r.typ)),
		}
		if msgArg < 0 {
			msgArg = len(call.Args) - 1 // the mk function
		}
		if msgArg >= 0 && msgArg < len(call.Args) {
			d.Pos = call.Args[msgArg].Pos()
			d.End = call.Args[msgArg].End()
		}
		for _, o := range refs[1:] {
			if o.field != nil && o.field.Pos().IsValid() {
				d.Related = append(d.Related, analysis.RelatedInformation{
					Pos:     o.field.Pos(),
					Message: fmt.Sprintf("also a mutable reference at %s (%s)", o.pathString(), typeString(pass, o.typ)),
				})
			}
		}
		pass.Report(d)

		if sendFuncs[fn.Name()] >= 0 && msgArg < len(call.Args) && !deferred(call, stack) {
			checkMove(w, call, call.Args[msgArg], stack)
		}
		return true
	})
	return nil, nil
}

// deferred reports whether call is the call of a defer statement: it runs at
// function exit, after everything that follows it.
func deferred(call *ast.CallExpr, stack []ast.Node) bool {
	if len(stack) < 2 {
		return false
	}
	d, ok := stack[len(stack)-2].(*ast.DeferStmt)
	return ok && d.Call == call
}

// messageType returns M for a call to one of the runtime send functions: the
// first type argument of the instantiation.
func messageType(info *types.Info, call *ast.CallExpr) types.Type {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	var id *ast.Ident
	switch f := ast.Unparen(fun).(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	}
	if id == nil {
		return nil
	}
	inst, ok := info.Instances[id]
	if !ok || inst.TypeArgs.Len() == 0 {
		return nil
	}
	m := inst.TypeArgs.At(0)
	if _, isParam := m.(*types.TypeParam); isParam {
		return nil // a generic caller: checked nowhere (documented)
	}
	return m
}

func typeString(pass *analysis.Pass, t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string { return p.Name() })
}

// ref is one mutable reference found inside a message type.
type ref struct {
	path  []string   // ".Room", ".Members", "[]" (an array element)
	typ   types.Type // the reference type
	field *types.Var // the last field on the path, if any
}

func (r ref) pathString() string {
	if len(r.path) == 0 {
		return "the top level"
	}
	return strings.ReplaceAll(strings.Join(r.path, ""), "[]", "[i]")
}

// mutableRefs lists the mutable references in t, in field order.
func (w walker) mutableRefs(t types.Type) []ref {
	var out []ref
	w.walkType(t, nil, nil, map[types.Type]bool{}, &out)
	return out
}

// walker finds the mutable references inside types.
type walker struct{ pass *analysis.Pass }

func (w walker) walkType(t types.Type, path []string, field *types.Var, onPath map[types.Type]bool, out *[]ref) {
	t = types.Unalias(t)
	if w.isExempt(t) {
		return
	}
	if n, ok := t.(*types.Named); ok {
		if onPath[n] {
			return // a cycle (only possible through invalid code)
		}
		onPath[n] = true
		defer delete(onPath, n)
	}
	add := func() {
		*out = append(*out, ref{path: append([]string(nil), path...), typ: t, field: field})
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		if u.Kind() == types.UnsafePointer {
			add()
		}
	case *types.Pointer, *types.Map, *types.Slice, *types.Chan, *types.Signature:
		add()
	case *types.Array:
		w.walkType(u.Elem(), append(path, "[]"), field, onPath, out)
	case *types.Struct:
		for i := range u.NumFields() {
			f := u.Field(i)
			w.walkType(f.Type(), append(path, "."+f.Name()), f, onPath, out)
		}
	}
	// Interfaces and type parameters: unknown contents, not reported.
}

// exempt lists the named types, by package path and name, whose references
// are safe to share across shards: the runtime's handles, and standard (and
// OpenTelemetry) value types whose internal references are immutable.
var exempt = map[string]map[string]bool{
	RuntimePath:                      {"Addr": true, "Reply": true},
	"time":                           {"Time": true},
	"net/netip":                      {"Addr": true, "AddrPort": true, "Prefix": true},
	"unique":                         {"Handle": true},
	"go.opentelemetry.io/otel/trace": {"SpanContext": true, "TraceState": true},
}

// handles lists handle types documented as usable from any shard, by value
// or by pointer, that cannot carry Directive themselves (none today: the
// project's own handles, such as dbowner.DB, carry it).
var handles = map[string]map[string]bool{}

// isExempt reports whether t is an exempt type, a handle type or a type
// declared with Directive, or a pointer to one of the latter two.
func (w walker) isExempt(t types.Type) bool {
	ptr := false
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t, ptr = p.Elem(), true
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Origin().Obj()
	if obj.Pkg() == nil {
		return false
	}
	if handles[obj.Pkg().Path()][obj.Name()] || w.pass.ImportObjectFact(obj, new(shardSafe)) {
		return true
	}
	return !ptr && exempt[obj.Pkg().Path()][obj.Name()]
}

// ---- WO-E223: use after send ----

// moved is one local variable (or a part of it) that a send moved.
type moved struct {
	v    *types.Var
	path []string   // ".F" (a field), "[]" (an element), "*" (a dereference) from v to the moved part
	refs [][]string // the paths of the references inside the moved part, relative to it
}

// checkMove reports uses of the variables that the message expression msg
// moves, after the statement that contains call.
func checkMove(w walker, call *ast.CallExpr, msg ast.Expr, stack []ast.Node) {
	pass := w.pass
	var ms []moved
	collectMoved(w, msg, &ms)
	if len(ms) == 0 {
		return
	}
	sendLine := pass.Fset.Position(call.Pos()).Line
	for _, m := range ms {
		c := &mover{pass: pass, m: m, fresh: make([]bool, len(m.refs)), sendLine: sendLine}
		c.climb(stack)
	}
}

// collectMoved finds the moved variables of a message expression.
func collectMoved(w walker, e ast.Expr, out *[]moved) {
	info := w.pass.TypesInfo
	e = ast.Unparen(e)
	if lit, ok := e.(*ast.CompositeLit); ok {
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				el = kv.Value
			}
			collectMoved(w, el, out)
		}
		return
	}
	t := info.TypeOf(e)
	if t == nil {
		return
	}
	refs := w.mutableRefs(t)
	if len(refs) == 0 {
		return // a value copy: nothing is shared
	}
	v, path, ok := rootVar(info, e)
	if !ok || !isLocal(v) {
		return
	}
	m := moved{v: v, path: path}
	for _, r := range refs {
		m.refs = append(m.refs, r.path)
	}
	*out = append(*out, m)
}

// rootVar resolves x, x.f.g, x[i], *x (and mixes) to x and the path below it.
func rootVar(info *types.Info, e ast.Expr) (*types.Var, []string, bool) {
	var rev []string
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			v, ok := info.Uses[x].(*types.Var)
			if !ok {
				return nil, nil, false
			}
			path := make([]string, len(rev))
			for i := range rev {
				path[i] = rev[len(rev)-1-i]
			}
			return v, path, true
		case *ast.SelectorExpr:
			sel, ok := info.Selections[x]
			if !ok || sel.Kind() != types.FieldVal {
				return nil, nil, false
			}
			// Spell out promoted fields and implicit dereferences.
			var steps []string
			t := sel.Recv()
			for _, idx := range sel.Index() {
				if p, isPtr := t.Underlying().(*types.Pointer); isPtr {
					steps = append(steps, "*")
					t = p.Elem()
				}
				st, isStruct := t.Underlying().(*types.Struct)
				if !isStruct {
					return nil, nil, false
				}
				f := st.Field(idx)
				steps = append(steps, "."+f.Name())
				t = f.Type()
			}
			for i := len(steps) - 1; i >= 0; i-- {
				rev = append(rev, steps[i])
			}
			e = x.X
		case *ast.IndexExpr:
			rev = append(rev, "[]")
			e = x.X
		case *ast.StarExpr:
			rev = append(rev, "*")
			e = x.X
		default:
			return nil, nil, false
		}
	}
}

func isLocal(v *types.Var) bool {
	if v.IsField() || v.Pkg() == nil || v.Parent() == nil {
		return false
	}
	return v.Parent() != v.Pkg().Scope() && v.Parent() != types.Universe
}

type mover struct {
	pass     *analysis.Pass
	m        moved
	fresh    []bool // per m.refs: reassigned since the send
	sendLine int
	reported bool
}

// climb scans the statements after the send in each enclosing block, from the
// innermost out, until the function body, a terminating statement or a
// reassignment ends the search.
func (c *mover) climb(stack []ast.Node) {
	for i := len(stack) - 2; i >= 0 && !c.reported; i-- {
		child := stack[i+1]
		var rest []ast.Stmt
		switch p := stack[i].(type) {
		case *ast.FuncLit, *ast.FuncDecl:
			return
		case *ast.BlockStmt:
			rest = after(p.List, child)
		case *ast.CaseClause:
			rest = after(p.Body, child)
		case *ast.CommClause:
			rest = after(p.Body, child)
		default:
			continue
		}
		if stop := c.scanList(rest); stop {
			return
		}
	}
}

// after returns the statements in list after child, or all of them when child
// is not one of them (a case expression or comm statement).
func after(list []ast.Stmt, child ast.Node) []ast.Stmt {
	for j, s := range list {
		if s == child {
			return list[j+1:]
		}
	}
	return list
}

// scanList scans straight-line statements; it reports whether the search
// ends here (a use was reported, the variable was reassigned, or control
// leaves).
func (c *mover) scanList(list []ast.Stmt) bool {
	for _, s := range list {
		if c.scanStmt(s) || c.reported {
			return true
		}
	}
	return false
}

// scanStmt scans one statement executed unconditionally after the send and
// reports whether the search ends at it.
func (c *mover) scanStmt(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.AssignStmt:
		for _, r := range s.Rhs {
			c.uses(r)
		}
		killed := false
		for _, l := range s.Lhs {
			if c.assign(l, s.Tok) {
				killed = true
			}
		}
		return killed || c.reported
	case *ast.BlockStmt:
		return c.scanList(s.List)
	case *ast.LabeledStmt:
		return c.scanStmt(s.Stmt)
	case *ast.ReturnStmt:
		for _, r := range s.Results {
			c.uses(r)
		}
		return true
	case *ast.BranchStmt:
		return true
	case *ast.ExprStmt:
		c.uses(s.X)
		if isPanic(c.pass.TypesInfo, s.X) {
			return true
		}
		return c.reported
	case *ast.IfStmt:
		if s.Init != nil && c.scanStmt(s.Init) {
			return true
		}
		c.uses(s.Cond)
		c.branch(s.Body.List)
		if s.Else != nil {
			c.branch([]ast.Stmt{s.Else})
		}
		return c.reported
	case *ast.ForStmt:
		if s.Init != nil && c.scanStmt(s.Init) {
			return true
		}
		if s.Cond != nil {
			c.uses(s.Cond)
		}
		c.branch(s.Body.List)
		if s.Post != nil {
			c.branch([]ast.Stmt{s.Post})
		}
		return c.reported
	case *ast.RangeStmt:
		c.uses(s.X)
		c.branch(s.Body.List)
		return c.reported
	case *ast.SwitchStmt:
		if s.Init != nil && c.scanStmt(s.Init) {
			return true
		}
		if s.Tag != nil {
			c.uses(s.Tag)
		}
		for _, cc := range s.Body.List {
			cc := cc.(*ast.CaseClause)
			for _, e := range cc.List {
				c.uses(e)
			}
			c.branch(cc.Body)
		}
		return c.reported
	case *ast.TypeSwitchStmt:
		if s.Init != nil && c.scanStmt(s.Init) {
			return true
		}
		c.uses(s.Assign)
		for _, cc := range s.Body.List {
			c.branch(cc.(*ast.CaseClause).Body)
		}
		return c.reported
	case *ast.SelectStmt:
		for _, cc := range s.Body.List {
			cc := cc.(*ast.CommClause)
			if cc.Comm != nil {
				c.uses(cc.Comm)
			}
			c.branch(cc.Body)
		}
		return c.reported
	default: // DeclStmt, GoStmt, DeferStmt, SendStmt, IncDecStmt, ...
		c.uses(s)
		return c.reported
	}
}

// branch scans a conditionally executed list: a reassignment in it ends the
// search in it only.
func (c *mover) branch(list []ast.Stmt) {
	saved := append([]bool(nil), c.fresh...)
	c.scanList(list)
	copy(c.fresh, saved)
}

func isPanic(info *types.Info, e ast.Expr) bool {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := ast.Unparen(call.Fun).(*ast.Ident)
	if !ok {
		return false
	}
	b, ok := info.Uses[id].(*types.Builtin)
	return ok && b.Name() == "panic"
}

// assign handles an assignment to l. It reports whether the moved part is
// entirely fresh afterwards (the search ends). Assigning the variable, or a
// prefix of the moved path, makes it fresh; assigning a field of the moved
// part (through non-pointer structs only) makes the references below that
// field fresh; anything else that reaches the moved part (an element, a
// dereference, x += y) is a use.
func (c *mover) assign(l ast.Expr, tok token.Token) bool {
	if tok != token.ASSIGN && tok != token.DEFINE {
		c.uses(l)
		return false
	}
	v, path, ok := rootVar(c.pass.TypesInfo, l)
	if !ok || v != c.m.v {
		c.uses(l) // e.g. s[x.i] = 1: the index reads x
		return false
	}
	if !overlaps(path, c.m.path) {
		return false // a sibling of the moved part
	}
	if len(path) <= len(c.m.path) {
		if direct(path) {
			return true
		}
		c.uses(l)
		return false
	}
	rel := path[len(c.m.path):]
	if !direct(rel) {
		c.uses(l)
		return false
	}
	all := true
	for i, r := range c.m.refs {
		if len(r) >= len(rel) && overlaps(r, rel) {
			c.fresh[i] = true
		}
		all = all && c.fresh[i]
	}
	return all
}

// direct reports whether a path selects fields of struct values only.
func direct(path []string) bool {
	for _, p := range path {
		if p == "*" || p == "[]" {
			return false
		}
	}
	return true
}

// live reports whether a use of path (from the variable) may reach a
// reference the send moved and that was not reassigned since.
func (c *mover) live(path []string) bool {
	if !overlaps(path, c.m.path) {
		return false
	}
	var rel []string
	if len(path) > len(c.m.path) {
		rel = path[len(c.m.path):]
	}
	for i, r := range c.m.refs {
		if !c.fresh[i] && overlaps(rel, r) {
			return true
		}
	}
	return false
}

// overlaps reports whether one path is a prefix of the other.
func overlaps(a, b []string) bool {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// uses reports the first use of the moved part inside n.
func (c *mover) uses(n ast.Node) {
	if n == nil || c.reported {
		return
	}
	info := c.pass.TypesInfo
	ast.Inspect(n, func(x ast.Node) bool {
		if c.reported {
			return false
		}
		e, ok := x.(ast.Expr)
		if !ok {
			return true
		}
		// Take the longest selector/index chain rooted at the variable.
		switch e.(type) {
		case *ast.SelectorExpr, *ast.IndexExpr, *ast.StarExpr, *ast.Ident:
		default:
			return true
		}
		v, path, ok := rootVar(info, e)
		if !ok {
			return true // e.g. a method value x.M: its receiver x is inspected next
		}
		if v != c.m.v {
			return true // another variable's chain; its indexes may still use ours
		}
		if c.live(path) {
			c.report(e)
			return false
		}
		// Not the prefixes of the chain (x in x.N), only its indexes (x.a[x.i]).
		for ch := e; ; {
			switch x := ast.Unparen(ch).(type) {
			case *ast.SelectorExpr:
				ch = x.X
				continue
			case *ast.StarExpr:
				ch = x.X
				continue
			case *ast.IndexExpr:
				c.uses(x.Index)
				ch = x.X
				continue
			}
			break
		}
		return false
	})
}

func (c *mover) report(e ast.Expr) {
	c.reported = true
	name := c.m.v.Name()
	for _, p := range c.m.path {
		switch p {
		case "*":
		case "[]":
			name += "[i]"
		default:
			name += p
		}
	}
	c.pass.Report(analysis.Diagnostic{
		Pos:     e.Pos(),
		End:     e.End(),
		Message: fmt.Sprintf("WO-E223: %s used after it was sent (line %d): a sent message is moved to the receiver", name, c.sendLine),
	})
}
