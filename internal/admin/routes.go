package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

func (s *Server) routes() {
	s.mux.HandleFunc("GET "+adminapi.PathCluster, s.getCluster)
	s.mux.HandleFunc("POST "+adminapi.PathMembers, s.addMember)
	s.mux.HandleFunc("POST "+adminapi.PathMembers+"/{id}/promote", s.onMember(opPromote, "member promoted to voter", adminapi.RoleVoter))
	s.mux.HandleFunc("POST "+adminapi.PathMembers+"/{id}/demote", s.onMember(opDemote, "member demoted to learner", adminapi.RoleLearner))
	s.mux.HandleFunc("POST "+adminapi.PathMembers+"/{id}/drain", s.onMember(opDrain, "member marked draining", adminapi.RoleLearner))
	s.mux.HandleFunc("DELETE "+adminapi.PathMembers+"/{id}/drain", s.onMember(opUndrain, "member's draining mark cleared", adminapi.RoleLearner))
	s.mux.HandleFunc("DELETE "+adminapi.PathMembers+"/{id}", s.remove)
	s.mux.HandleFunc("POST "+adminapi.PathLeader, s.transfer)
	s.mux.HandleFunc("GET "+adminapi.PathBackup, s.getBackup)
}

// ServeHTTP serves /admin/...: the token first, then the routes; the mux's
// own 404 and 405 come out in the JSON error shape too.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !httpd.BearerOK(r, s.opts.Tokens) {
		httpd.Unauthorized(w)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		w = &jsonMuxError{ResponseWriter: w}
	}
	s.mux.ServeHTTP(w, r)
}

// jsonMuxError turns the mux's plain-text 404/405 (Allow kept) into the
// JSON error shape.
type jsonMuxError struct {
	http.ResponseWriter
	wrote bool
}

func (j *jsonMuxError) WriteHeader(code int) {
	if j.wrote {
		return
	}
	j.wrote = true
	msg := "no such admin route"
	if code == http.StatusMethodNotAllowed {
		msg = "method not allowed; Allow lists the methods of this route"
	}
	h := j.ResponseWriter.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	j.ResponseWriter.WriteHeader(code)
	j.ResponseWriter.Write(httpd.ErrorBody(msg))
}

func (j *jsonMuxError) Write(p []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusNotFound)
	}
	return len(p), nil // the mux's plain-text body is replaced
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	c, err := s.Cluster(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	req, err := parseAddMember(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.change(w, r, call{op: opAddLearner, id: uint64(req.ID), addr: req.Addr}, "learner added", adminapi.RoleLearner)
}

// onMember is the handler of a change of the member the path names: op,
// logged as done, answering the member with the role it is expected to
// have after it.
func (s *Server) onMember(op opKind, done, role string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, ok := pathID(w, r); ok {
			s.change(w, r, call{op: op, id: uint64(id)}, done, role)
		}
	}
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	if id, ok := pathID(w, r); ok {
		s.change(w, r, call{op: opRemove, id: uint64(id)}, "member removed", "")
	}
}

// change makes the membership change c and answers it: the error's
// status, or the member c names as the status after the change lists it,
// or 204 when role is "" (a removal: nothing left to show). When the
// change applied but the status after it failed, the answer is what was
// asked (the member with role). done is the log line of a success.
func (s *Server) change(w http.ResponseWriter, r *http.Request, c call, done, role string) {
	ans, err := s.call(r.Context(), c)
	if err == nil {
		err = ans.err
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := adminapi.ID(c.id)
	args := []any{"member", id.String()}
	if c.addr != "" {
		args = append(args, "addr", c.addr)
	}
	s.log.Info("admin: "+done, args...)
	if role == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m, ok := ans.find(c.id)
	if !ok {
		m = adminapi.Member{ID: id, Ordinal: id.Ordinal(), Addr: c.addr, Role: role}
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request) {
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	req, err := parseTransferLeader(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ans, err := s.call(r.Context(), call{op: opTransfer, id: uint64(req.To)})
	if err == nil {
		err = ans.err
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := ans.cluster()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("admin: leadership transferred", "asked", req.To.String(), "leader", c.Leader.String())
	writeJSON(w, http.StatusOK, c)
}

// maxBody bounds an admin request body: the largest valid one is under
// 2 KiB.
const maxBody = 64 << 10

func (s *Server) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "body too large: at most 65536 bytes")
		} else {
			writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return nil, false
	}
	return b, true
}

func pathID(w http.ResponseWriter, r *http.Request) (adminapi.ID, bool) {
	id, err := adminapi.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "path: "+err.Error())
		return 0, false
	}
	return id, true
}

// statusOf maps a database error onto the contract's status codes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errUnknownMember):
		return http.StatusNotFound
	case errors.Is(err, errConflict), errors.Is(err, dbowner.ErrNotHeld):
		return http.StatusConflict
	case errors.Is(err, errNoQuorum), errors.Is(err, node.ErrNoLeader), errors.Is(err, errNoAnswer),
		errors.Is(err, errJoining), errors.Is(err, errRemoved), errors.Is(err, node.ErrRemoved),
		errors.Is(err, node.ErrStopped), errors.Is(err, errNotOpen), errors.Is(err, runtime.ErrTimeout),
		errors.Is(err, runtime.ErrStopped), errors.Is(err, dbowner.ErrClosed), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	switch code {
	case http.StatusServiceUnavailable:
		// Worth retrying: a leader is elected in about a second.
		w.Header().Set("Retry-After", "1")
	case http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "admin: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(httpd.ErrorBody(msg))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
