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
