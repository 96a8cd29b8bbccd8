package iobackend

import (
	"fmt"
	"strings"
)

// Mode is the WO_IO setting: which backend the process wants.
type Mode string

const (
	// ModeAuto uses io_uring when the probe passes and epoll otherwise.
	ModeAuto Mode = "auto"
	// ModeUring requires io_uring; startup fails when it is unusable.
	ModeUring Mode = "uring"
	// ModeEpoll uses epoll without probing io_uring.
	ModeEpoll Mode = "epoll"
)

// ParseMode parses a WO_IO value. Surrounding blanks and case are ignored, and
// the empty string (the variable unset) means ModeAuto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeUring, ModeEpoll:
		return m, nil
	}
	return "", fmt.Errorf("iobackend: invalid WO_IO value %q: want auto, uring or epoll", s)
}

func (m Mode) String() string { return string(m) }
