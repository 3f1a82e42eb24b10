package cli

import (
	"fmt"
	"io"
	"log/slog"
)

// Log formats of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// checkLogFormat refuses a --log-format other than text or json (exit 2).
func checkLogFormat(format string) error {
	if format != logText && format != logJSON {
		return usageErr(fmt.Errorf("--log-format %q: want text or json", format))
	}
	return nil
}

// newLogger is a worker's logger on w: slog's text or JSON handler, at info
// level (one line per task start and end, warnings) or, verbose, at debug
// level (every step too).
func newLogger(w io.Writer, format string, verbose bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	if format == logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
