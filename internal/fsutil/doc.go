// Package fsutil holds file-system steps that several packages need to do
// the same careful way: making a staged directory durable before it is
// renamed into place; opening a file to read only when it is a regular
// one, never blocking on a FIFO or a device; temporary directories named
// for their process, removed by the next one when it died first.
package fsutil
