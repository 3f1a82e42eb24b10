// Package targetclass owns the one rule for target classes that submit,
// the nightly and the web UI share: a class is accepted when it is
// declared (TUNEFLEET_CLASSES, a fleet file's classes:, submit
// --allow-unserved) or some worker ever served it (the registry in
// runstate); otherwise it is refused with the known classes listed and the
// closest one suggested. An accepted class with no live worker is waiting,
// which is what scale-from-zero needs: the tasks queue until a worker of
// the class starts.
//
// It reads the registry through runstate and must not import jobs, fleet
// or the CLI (they import it).
package targetclass
