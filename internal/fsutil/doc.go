// Package fsutil holds file-system steps that several packages need to do
// the same careful way: making a staged directory durable before it is
// renamed into place.
package fsutil
