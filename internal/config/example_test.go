package config_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/writeonce/wo/internal/config"
)

// Load with a file, an environment variable and a flag: the flag wins over
// the environment, which wins over the file.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "config-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "worker.toml")
	os.WriteFile(path, []byte("[runtime]\nshards = 4\nio = \"epoll\"\n"), 0o644)
	os.Setenv("WO_SHARDS", "2")
	defer os.Unsetenv("WO_SHARDS")

	cfg, err := config.Load([]string{"--config", path, "--data-dir", "/tmp/wo"}, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Shards, cfg.Sources["runtime.shards"])
	fmt.Println(cfg.IO, cfg.DataDir, cfg.Reductions)

	_, err = config.Load([]string{"--config", path, "--pin", "sometimes"}, io.Discard)
	fmt.Println(err)
	// Output:
	// 2 env WO_SHARDS
	// epoll /tmp/wo 4000
	// config: runtime.pin = "sometimes" (flag --pin): pin mode "sometimes": want auto, on or off
}
