// Command secretsmanager runs the Secrets Manager stand-in (package
// testkit/secretsmanager: CreateSecret, PutSecretValue and GetSecretValue
// only) for the local stack, on a loopback address (-addr; another host is
// refused, since the stand-in checks no signature). -secret NAME=VALUE,
// repeatable, seeds a secret. It prints one line, "secretsmanager
// listening at http://HOST:PORT", when it serves, and runs until SIGTERM or
// SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/secretsmanager"
)

func main() {
	cmdmain.Run("secretsmanager", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}

// seeds is the repeatable -secret flag.
type seeds [][2]string

func (s *seeds) String() string { return fmt.Sprintf("%d secrets", len(*s)) }

func (s *seeds) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want NAME=VALUE")
	}
	*s = append(*s, [2]string{name, value})
	return nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("secretsmanager", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on: a loopback host (port 0 picks a free one)")
	var seed seeds
	fs.Var(&seed, "secret", "NAME=VALUE: a secret to create at start (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopback(*addr); err != nil {
		return err
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	s := secretsmanager.New()
	for _, kv := range seed {
		s.Put(kv[0], kv[1])
	}
	s.SetEndpoint("http://" + l.Addr().String())
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	fmt.Fprintf(stdout, "secretsmanager listening at %s (%d secrets seeded)\n", s.Endpoint(), len(seed))
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(shut)
}

// loopback refuses an address whose host is not a loopback IP or
// "localhost".
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %q: the stand-in checks no signature, so it listens on a loopback address only", addr)
	}
	return nil
}
