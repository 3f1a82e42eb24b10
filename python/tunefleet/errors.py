"""The one exception type the recorder raises for bad input."""


class RecordError(ValueError):
    """Bad input to tunefleet.record: the message names what to fix.

    When it is raised no bundle directory is left behind.
    """


class RecordWarning(UserWarning):
    """Something recorded that works but deserves the user's attention (a shape fixed by the tracer,
    a module only tunefleet.load can rebuild): the message says what and where."""
