// Command preceptd is the precept server: it consumes HITL decisions from
// Redis, stores them in git, and serves the Connect API.
//
// Usage:
//
//	preceptd [--config PATH]
//
// Without a configuration file (flag or PRECEPT_CONFIG) it runs on the
// embedded defaults: API on 127.0.0.1:8080, data in ./data, an embedded
// Redis-protocol server on 127.0.0.1:6380.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "preceptd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("preceptd", flag.ContinueOnError)
	path := fs.String("config", os.Getenv("PRECEPT_CONFIG"), "configuration file (YAML); env PRECEPT_CONFIG")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		return err
	}
	log := app.NewLogger(os.Stderr, cfg.Log)
	if *path == "" {
		log.Info("no configuration file: using the embedded defaults")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx)
}
