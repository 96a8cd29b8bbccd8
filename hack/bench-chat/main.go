// Command bench-chat is the chat benchmark: one load generator run against
// three servers of the same JSON-over-WebSocket protocol: wo's worker
// (cmd/worker at its shipped defaults, started by hack/bench-chat.sh: fibers,
// rooms as actors, every message made durable in the database before it is
// delivered), a peer written the canonical Go way (gorilla/websocket's chat
// example: a hub goroutine per room, a read pump and a write pump goroutine
// per connection, a buffered send channel of 256) that stores nothing, and
// the same peer made durable the way a Go programmer would do it: every
// message appended to a write-ahead log with group commit (one writer
// goroutine, one write and one fdatasync for all the appends waiting) before
// its hub broadcasts it. The peers import nothing of wo's.
//
//	bench-chat -mode peer    -addr 127.0.0.1:7082             # the gorilla-style peer
//	bench-chat -mode peerwal -addr 127.0.0.1:7083 -data DIR   # the same peer, with a WAL
//	bench-chat -mode load    -addr ... -conns 10000 -pid PID  # the load generator, closed loop
//	bench-chat -mode load    -addr ... -conns 1000 -room 10 -rate 10 -pid PID  # open loop
//
// The closed loop keeps one message in flight per sender (-senders per room)
// and shows the most a server delivers; the open loop has every connection
// send -rate messages a second on its own schedule whatever the server does,
// and measures each delivery from the time its message was due, so a server
// that falls behind shows it in the tail instead of slowing the load.
// Resident memory is read from /proc as the server holds it.
//
// hack/bench-chat.sh runs the whole comparison; see docs/benchmarks.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
)

// profStop ends the CPU profile, if one runs.
var profStop = func() {}

func main() {
	mode := flag.String("mode", "", "peer, peerwal or load")
	addr := flag.String("addr", "127.0.0.1:7081", "listen (wo, peer, peerwal) or connect (load) address")
	data := flag.String("data", "", "wo, peerwal: data directory")
	conns := flag.Int("conns", 1000, "load: WebSocket clients")
	room := flag.Int("room", 100, "load: clients per room")
	senders := flag.Int("senders", 2, "load, closed loop: senders per room, each with one message in flight")
	rate := flag.Float64("rate", 0, "load: messages per second from every connection, an open loop (0: closed loop)")
	warm := flag.Duration("warmup", 3*time.Second, "load: warm-up before measuring")
	dur := flag.Duration("duration", 10*time.Second, "load: measured time")
	pid := flag.Int("pid", 0, "load: the server's pid, for its resident memory")
	name := flag.String("name", "", "load: the server's name in the report")
	prof := flag.String("cpuprofile", "", "wo, peer, peerwal: write a CPU profile here until SIGTERM")
	flag.Parse()
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		profStop = func() { pprof.StopCPUProfile(); f.Close() }
	}
	switch *mode {
	case "peer":
		servePeer(*addr, nil)
	case "peerwal":
		if *data == "" {
			log.Fatal("bench-chat: -mode peerwal needs -data DIR")
		}
		w, err := openGroupWAL(*data)
		if err != nil {
			log.Fatal(err)
		}
		servePeer(*addr, w)
	case "load":
		load(*addr, *name, *conns, *room, *senders, *rate, *warm, *dur, *pid)
	default:
		log.Fatalf("bench-chat: -mode %q: want peer, peerwal or load", *mode)
	}
}

// The peer: gorilla/websocket's chat example, with a hub per room. With a
// WAL (-mode peerwal) a message is appended to it, durably, before it goes
// to its hub; the rest is the same code.

type peerClient struct {
	hub  *peerHub
	conn *websocket.Conn
	send chan []byte
	nick string
	done chan error // the WAL's answer to this client's append (peerwal)
}

type peerHub struct {
	name       string
	clients    map[*peerClient]bool
	broadcast  chan []byte
	register   chan *peerClient
	unregister chan *peerClient
}

func (h *peerHub) run() {
	for {
		select {
		case c := <-h.register:
			h.clients[c] = true
		case c := <-h.unregister:
			if h.clients[c] {
				delete(h.clients, c)
				close(c.send)
			}
		case m := <-h.broadcast:
			for c := range h.clients {
				select {
				case c.send <- m:
				default: // too slow: the example drops the client
					close(c.send)
					delete(h.clients, c)
				}
			}
		}
	}
}

type peerServer struct {
	mu   sync.Mutex
	hubs map[string]*peerHub
	seq  atomic.Uint64
	wal  *groupWAL // nil: nothing is stored (-mode peer)
}

// publish hands a chat message to c's hub, after making it durable when the
// server has a WAL. The read pump waits for the group commit, as a handler
// waits for its database; other connections' appends share the fsync.
func (s *peerServer) publish(c *peerClient, b []byte) {
	if s.wal != nil {
		if err := s.wal.append(b, c.done); err != nil {
			log.Fatalf("bench-chat: wal: %v", err) // a failed fsync: nothing after it is durable
		}
	}
	c.hub.broadcast <- b
}

func (s *peerServer) hub(name string) *peerHub {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hubs[name]
	if h == nil {
		h = &peerHub{name: name, clients: map[*peerClient]bool{}, broadcast: make(chan []byte),
			register: make(chan *peerClient), unregister: make(chan *peerClient)}
		s.hubs[name] = h
		go h.run()
	}
	return h
}

type inFrame struct {
	Type string `json:"type"`
	Nick string `json:"nick"`
	Room string `json:"room"`
	Text string `json:"text"`
}

type outFrame struct {
	Type string `json:"type"`
	Room string `json:"room"`
	Nick string `json:"nick"`
	Text string `json:"text"`
	Seq  uint64 `json:"seq,omitempty"`
	At   string `json:"at,omitempty"`
}

const (
	writeWait  = 10 * time.Second
	pongWait   = 60 * time.Second
	pingPeriod = (pongWait * 9) / 10
)

func (s *peerServer) readPump(c *peerClient) {
	defer func() {
		if c.hub != nil {
			c.hub.unregister <- c
		}
		c.conn.Close()
	}()
	c.conn.SetReadLimit(4096)
	c.conn.SetReadDeadline(time.Now().Add(pongWait))
	c.conn.SetPongHandler(func(string) error { c.conn.SetReadDeadline(time.Now().Add(pongWait)); return nil })
	for {
		_, msg, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		var in inFrame
		if json.Unmarshal(msg, &in) != nil {
			continue
		}
		switch in.Type {
		case "nick":
			c.nick = in.Nick
		case "join":
			if c.hub != nil {
				continue
			}
			c.hub = s.hub(strings.TrimPrefix(in.Room, "#"))
			c.hub.register <- c
			go s.writePump(c)
			b, _ := json.Marshal(outFrame{Type: "info", Room: c.hub.name, Nick: "*server*", Text: c.nick + " joined"})
			c.hub.broadcast <- b
		case "say":
			if c.hub == nil {
				continue
			}
			b, _ := json.Marshal(outFrame{Type: "message", Room: c.hub.name, Nick: c.nick, Text: in.Text,
				Seq: s.seq.Add(1), At: time.Now().UTC().Format(time.RFC3339Nano)})
			s.publish(c, b)
		}
	}
}

func (s *peerServer) writePump(c *peerClient) {
	ticker := time.NewTicker(pingPeriod)
	defer func() {
		ticker.Stop()
		c.conn.Close()
	}()
	for {
		select {
		case m, ok := <-c.send:
			c.conn.SetWriteDeadline(time.Now().Add(writeWait))
			if !ok {
				c.conn.WriteMessage(websocket.CloseMessage, []byte{})
				return
			}
			w, err := c.conn.NextWriter(websocket.TextMessage)
			if err != nil {
				return
			}
			w.Write(m)
			// The example coalesces queued messages into one frame with
			// newlines; our protocol is one JSON value per frame, so each
			// queued message is its own frame, flushed together.
			if err := w.Close(); err != nil {
				return
			}
			for n := len(c.send); n > 0; n-- {
				if err := c.conn.WriteMessage(websocket.TextMessage, <-c.send); err != nil {
					return
				}
			}
		case <-ticker.C:
			c.conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}

func servePeer(addr string, wal *groupWAL) {
	s := &peerServer{hubs: map[string]*peerHub{}, wal: wal}
	up := websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024}
	mux := http.NewServeMux()
	mux.HandleFunc("/chat", func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &peerClient{conn: conn, send: make(chan []byte, 256), nick: "guest"}
		if wal != nil {
			c.done = make(chan error, 1)
		}
		go s.readPump(c)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		profStop()
		os.Exit(0)
	}()
	log.Fatal(http.Serve(ln, mux))
}

// The peer's write-ahead log: size-rotated, preallocated segment files of
// records, each [length uint32 LE][CRC32C of the payload uint32 LE][payload],
// written with group commit. One writer goroutine takes every append waiting
// (from every room's connections), writes them with one write, calls
// fdatasync once and then answers each appender, whose message then goes to
// its hub. While it syncs, the next group gathers in the queue.

const walSegmentSize = 64 << 20 // preallocated, so that fdatasync has no file size to update

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type walAppend struct {
	rec  []byte
	done chan error
}

type groupWAL struct {
	dir    string
	q      chan walAppend
	f      *os.File
	fd     int
	off    int64 // where the next group is written in f
	seg    int   // f's number
	buf    []byte
	failed error // sticky: after a failed write or sync nothing is accepted
}

func openGroupWAL(dir string) (*groupWAL, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &groupWAL{dir: dir, q: make(chan walAppend, 1<<14), seg: -1}
	if err := w.roll(); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// append queues rec and waits until it is durable. done is the caller's,
// buffered by one and used by one append at a time.
func (w *groupWAL) append(rec []byte, done chan error) error {
	w.q <- walAppend{rec, done}
	return <-done
}

// roll starts the next segment: created, preallocated, and its directory
// entry made durable.
func (w *groupWAL) roll() error {
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			return err
		}
	}
	w.seg++
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("%08d.wal", w.seg)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, walSegmentSize); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	d, err := os.Open(w.dir)
	if err != nil {
		f.Close()
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.fd, w.off = f, int(f.Fd()), 0
	return nil
}

func (w *groupWAL) run() {
	var group []walAppend
	for a := range w.q {
		group = append(group[:0], a)
	more:
		for {
			select {
			case a := <-w.q:
				group = append(group, a)
			default:
				break more
			}
		}
		err := w.commit(group)
		for i := range group {
			group[i].done <- err
			group[i] = walAppend{}
		}
	}
}

// commit writes group's records with one write and makes them durable with
// one fdatasync.
func (w *groupWAL) commit(group []walAppend) error {
	if w.failed != nil {
		return w.failed
	}
	w.buf = w.buf[:0]
	for _, a := range group {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(a.rec)))
		w.buf = binary.LittleEndian.AppendUint32(w.buf, crc32.Checksum(a.rec, castagnoli))
		w.buf = append(w.buf, a.rec...)
	}
	if w.off > 0 && w.off+int64(len(w.buf)) > walSegmentSize {
		if err := w.roll(); err != nil {
			w.failed = err
			return err
		}
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		w.failed = err
		return err
	}
	if err := unix.Fdatasync(w.fd); err != nil {
		w.failed = err
		return err
	}
	w.off += int64(len(w.buf))
	return nil
}

// The load generator.

// hist is a latency histogram with buckets 2% apart, from 1µs.
type hist struct{ b [1200]atomic.Int64 }

func (h *hist) add(d time.Duration) {
	us := float64(d) / 1e3
	i := 0
	if us > 1 {
		i = int(math.Log(us) / math.Log(1.02))
	}
	h.b[min(i, len(h.b)-1)].Add(1)
}

func (h *hist) quantile(q float64) time.Duration {
	var total int64
	for i := range h.b {
		total += h.b[i].Load()
	}
	want := int64(math.Ceil(q * float64(total)))
	var n int64
	for i := range h.b {
		n += h.b[i].Load()
		if n >= want && n > 0 {
			return time.Duration(math.Pow(1.02, float64(i+1)) * 1e3)
		}
	}
	return 0
}

func (h *hist) reset() {
	for i := range h.b {
		h.b[i].Store(0)
	}
}

// rssKiB returns the server's resident memory as the process holds it: no
// collection is forced and nothing is returned to the OS first, so garbage
// and freed spans count, as they do for the machine.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return -1
}

func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// The load generator finds a message's timestamp and sender by these tags
// (its text is "t<ns> s<sender>"), without decoding the JSON.
var (
	textTag    = []byte(`"text":"t`)
	messageTag = []byte(`"type":"message"`)
)

// atoi reads a non-negative decimal; -1 if b holds anything else.
func atoi(b []byte) int64 {
	if len(b) == 0 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

type client struct {
	id   int
	c    net.Conn
	echo chan struct{} // a sender's own message came back
}

func load(addr, name string, conns, roomSize, senders int, rate float64, warm, dur time.Duration, pid int) {
	debug.SetGCPercent(400)
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	base := rssKiB(pid)
	clients := make([]*client, conns)
	var wg sync.WaitGroup
	var dialErr atomic.Value
	const dialers = 16
	for d := range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < conns; i += dialers {
				c, br, _, err := ws.Dial(context.Background(), "ws://"+addr+"/chat")
				if err != nil {
					dialErr.Store(fmt.Errorf("client %d: %w", i, err))
					return
				}
				if br != nil {
					ws.PutReader(br) // only the greeting; the readers start later
				}
				cl := &client{id: i, c: c, echo: make(chan struct{}, 1)}
				clients[i] = cl
				join, _ := json.Marshal(map[string]string{"type": "join", "room": "r" + strconv.Itoa(i/roomSize)})
				nick, _ := json.Marshal(map[string]string{"type": "nick", "nick": "c" + strconv.Itoa(i)})
				if wsutil.WriteClientText(c, nick) != nil || wsutil.WriteClientText(c, join) != nil {
					dialErr.Store(fmt.Errorf("client %d: join failed", i))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		log.Fatal(err)
	}
	var delivered, measuring atomic.Int64
	var lat hist
	for _, cl := range clients {
		go func() {
			// Buffered: a read syscall brings every frame that has
			// arrived, not one header or one payload at a time (2-3
			// syscalls a frame unbuffered, and the generator's one CPU
			// is what bounds the closed loop).
			rd := wsutil.Reader{Source: bufio.NewReaderSize(cl.c, 4096), State: ws.StateClientSide, CheckUTF8: false,
				OnIntermediate: wsutil.ControlFrameHandler(cl.c, ws.StateClientSide)}
			buf := make([]byte, 0, 512)
			for {
				h, err := rd.NextFrame()
				if err != nil {
					return
				}
				if h.OpCode.IsControl() {
					if err := rd.OnIntermediate(h, &rd); err != nil {
						return
					}
					continue
				}
				buf = buf[:0]
				for {
					if len(buf) == cap(buf) {
						buf = slices.Grow(buf, 512)
					}
					n, err := rd.Read(buf[len(buf):cap(buf)])
					buf = buf[:len(buf)+n]
					if err != nil {
						break
					}
				}
				// A message's text is "t<ns> s<sender>"; no full decode.
				i := bytes.Index(buf, textTag)
				if i < 0 || !bytes.Contains(buf, messageTag) {
					continue
				}
				rest := buf[i+len(textTag):]
				sp := bytes.IndexByte(rest, ' ')
				q := bytes.IndexByte(rest, '"')
				if sp < 0 || q < sp+2 {
					continue
				}
				ts := atoi(rest[:sp])
				sender := int(atoi(rest[sp+2 : q]))
				if measuring.Load() == 1 {
					delivered.Add(1)
					lat.add(time.Duration(time.Now().UnixNano() - ts))
				}
				if sender == cl.id {
					select {
					case cl.echo <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	time.Sleep(2 * time.Second) // joins settle
	idle := rssKiB(pid)
	stop := make(chan struct{})
	var sendWG sync.WaitGroup
	if rate > 0 {
		openLoop(clients, rate, stop, &sendWG)
	} else {
		closedLoop(clients, roomSize, senders, stop, &sendWG)
	}
	time.Sleep(warm)
	lat.reset()
	cpu0 := cpuTicks(pid)
	measuring.Store(1)
	t0 := time.Now()
	time.Sleep(dur)
	measuring.Store(0)
	el := time.Since(t0)
	cpu1 := cpuTicks(pid)
	close(stop)
	sendWG.Wait()
	busy := rssKiB(pid)
	n := delivered.Load()
	delivRate := float64(n) / el.Seconds()
	cpuPerK := float64(cpu1-cpu0) * 10 / (float64(n) / 1000) // 100 ticks/s: ms of server CPU per 1000 deliveries
	loop := "closed"
	if rate > 0 {
		loop = fmt.Sprintf("open@%g/s", rate)
	}
	fmt.Printf("%-7s loop=%s conns=%-6d rooms=%-4d delivered/s=%-9.0f p50=%-9s p99=%-9s server_cpu_ms_per_1k=%-6.2f rss_idle_per_conn=%.1fKiB rss_busy_per_conn=%.1fKiB\n",
		name, loop, conns, (conns+roomSize-1)/roomSize, delivRate, lat.quantile(0.50).Round(time.Microsecond), lat.quantile(0.99).Round(time.Microsecond),
		cpuPerK, float64(idle-base)/float64(conns), float64(busy-base)/float64(conns))
	for _, cl := range clients {
		cl.c.Close()
	}
}

// closedLoop starts senders per room, each sending its next message when
// its last one came back to it.
func closedLoop(clients []*client, roomSize, senders int, stop chan struct{}, wg *sync.WaitGroup) {
	for r := 0; r*roomSize < len(clients); r++ {
		for k := 0; k < senders && r*roomSize+k < len(clients); k++ {
			cl := clients[r*roomSize+k]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					msg := fmt.Sprintf(`{"type":"say","text":"t%d s%d"}`, time.Now().UnixNano(), cl.id)
					if wsutil.WriteClientText(cl.c, []byte(msg)) != nil {
						return
					}
					select {
					case <-cl.echo:
					case <-time.After(5 * time.Second):
					case <-stop:
						return
					}
				}
			}()
		}
	}
}

// openLoop has every client send rate messages a second, each stamped with
// the time it was due (not the time it went out), so that a server that
// falls behind is charged for the wait. The clients' schedules are spread
// over one period so that the load is even.
func openLoop(clients []*client, rate float64, stop chan struct{}, wg *sync.WaitGroup) {
	period := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			due := start.Add(period * time.Duration(i) / time.Duration(len(clients)))
			for {
				if d := time.Until(due); d > 0 {
					select {
					case <-stop:
						return
					case <-time.After(d):
					}
				} else {
					select {
					case <-stop:
						return
					default:
					}
				}
				msg := fmt.Sprintf(`{"type":"say","text":"t%d s%d"}`, due.UnixNano(), cl.id)
				if wsutil.WriteClientText(cl.c, []byte(msg)) != nil {
					return
				}
				due = due.Add(period)
			}
		}()
	}
}
