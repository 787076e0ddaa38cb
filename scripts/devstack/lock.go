package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the state folder's lock (Dir/devstack.lock): the stack that
// holds it owns the folder (its data, token, run counter, logs and sinks).
const LockFile = "devstack.lock"

// LockedError is a start refused because another stack holds the state
// folder: Pid is its process (0 if it has not written it yet).
type LockedError struct {
	Dir string
	Pid int
}

func (e *LockedError) Error() string {
	who := "another stack"
	if e.Pid > 0 {
		who = "the stack of pid " + strconv.Itoa(e.Pid)
	}
	return fmt.Sprintf("state folder %s is in use by %s (make dev is already running; it is left untouched). "+
		"A second stack needs its own folder and ports, e.g.: bin/devstack --dir /tmp/dev2 --dynamo-port 0 --sqs-port 0 --api-port 0 --feed-port 0 --admin-port-base 0",
		e.Dir, who)
}

// Lock takes the state folder dir for this process, before anything in it
// is touched: an exclusive flock(2) on Dir/devstack.lock, which holds the
// holder's pid. The kernel releases it when the process ends (no stale
// lock to clean up); release closes it earlier. A folder another process
// holds is a *LockedError naming its pid.
func Lock(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state folder lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &LockedError{Dir: dir, Pid: pid}
		}
		return nil, fmt.Errorf("state folder lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state folder lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
