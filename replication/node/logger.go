package node

import (
	"fmt"
	"log/slog"
)

// raftLogger sends the raft library's log to slog. Its Debug and Info are
// chatty (every election step), so they go out at debug level.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug("raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug("raft: " + fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug("raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug("raft: " + fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn("raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn("raft: " + fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error("raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error("raft: " + fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.l.Error("raft: " + fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	r.l.Error("raft: " + msg)
	panic(msg)
}
func (r raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) {
	panic(fmt.Sprintf(format, v...))
}
