package runtime

import (
	"reflect"
	"sync"
)

// typeNameCache interns one name string per receiver type, so an actor cell
// carries a pointer instead of a fresh string.
type typeNameCache struct {
	m sync.Map // reflect.Type -> *string
}

func (c *typeNameCache) get(t reflect.Type) *string {
	if v, ok := c.m.Load(t); ok {
		return v.(*string)
	}
	name := "<nil>"
	if t != nil {
		name = t.String()
	}
	v, _ := c.m.LoadOrStore(t, &name)
	return v.(*string)
}
