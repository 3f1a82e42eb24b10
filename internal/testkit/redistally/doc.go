// Package redistally counts what a redis-server executes by who sent it:
// it reads the server's MONITOR feed, which names each command's
// connection and lists, right after a script's EVAL or EVALSHA, the
// commands the script ran (INFO commandstats counts those too, and cannot
// say who sent what). A connection is named by the CLIENT SETNAME or
// HELLO … SETNAME it opened with (go-redis's Options.ClientName), so a
// benchmark that gives each sender a client of its own name gets a table
// per task by sender and command, a script's inner commands beside it.
//
// For benchmarks only: MONITOR costs the server a copy of every command.
package redistally
