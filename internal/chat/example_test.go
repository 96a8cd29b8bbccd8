package chat_test

import (
	"fmt"

	"github.com/writeonce/wo/internal/chat"
)

// Lines of the TCP protocol parse into the commands every transport shares.
func ExampleParseLine() {
	for _, line := range []string{"/join #lobby", "hello, room", "/history 5", "/dance"} {
		cmd, err := chat.ParseLine([]byte(line))
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("kind %d arg %q n %d\n", cmd.Kind, cmd.Arg, cmd.N)
	}
	// Output:
	// kind 3 arg "lobby" n 0
	// kind 1 arg "hello, room" n 0
	// kind 6 arg "" n 5
	// error: bad input: unknown command /dance (known: /nick NAME, /join ROOM, /leave, /rooms, /history [N], /quit)
}

// What a client receives names its room and its sender, on both transports.
func ExampleEvent() {
	ev := chat.Event{Kind: chat.EvMessage, Room: "lobby", Nick: "ann", Text: "hello", Seq: 7, At: 1764644645000000000}
	fmt.Print(string(ev.AppendLine(nil)))
	fmt.Println(string(ev.AppendJSON(nil)))
	// Output:
	// #lobby <ann> hello
	// {"type":"message","room":"lobby","nick":"ann","text":"hello","seq":7,"at":"2025-12-02T03:04:05Z"}
}

// A client back from a reconnect asks for what it missed: the messages
// after the last seq it saw, on join or with /history.
func ExampleParseFrame_since() {
	for _, frame := range []string{`{"type":"join","room":"lobby","since":41}`, `{"type":"history","since":41}`} {
		cmd, err := chat.ParseFrame([]byte(frame))
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("kind %d arg %q since %d\n", cmd.Kind, cmd.Arg, cmd.Since)
	}
	line, _ := chat.ParseLine([]byte("/history since 41"))
	fmt.Printf("kind %d since %d\n", line.Kind, line.Since)
	// Output:
	// kind 3 arg "lobby" since 41
	// kind 6 arg "" since 41
	// kind 6 since 41
}

// With a token set, a TCP connection's first line shows it; the token is
// never quoted back in an error.
func ExampleParseLine_auth() {
	for _, line := range []string{"/auth s3cret", "/auth", "/auth two words"} {
		cmd, err := chat.ParseLine([]byte(line))
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("kind %d\n", cmd.Kind)
	}
	// Output:
	// kind 8
	// error: bad input: /auth needs the token: /auth TOKEN
	// error: bad input: /auth: a token is one word without control characters
}
