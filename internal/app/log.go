package app

import (
	"io"
	"log/slog"

	"github.com/precept-dev/precept/internal/config"
)

// NewLogger returns the structured logger the configuration asks for.
func NewLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
