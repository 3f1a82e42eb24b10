package pickle

// Value is one node of the value model. The concrete types are None, Bool,
// Int, Float, Str, Bytes, List, Tuple, Dict, Global, Call, NewObj and Object.
type Value interface {
	isValue()
}

// None is Python's None.
type None struct{}

// Bool is a Python bool.
type Bool bool

// Int is a Python int (limited to the int64 range).
type Int int64

// Float is a Python float (IEEE double; NaN and infinities allowed).
type Float float64

// Str is a Python str; it must be valid UTF-8.
type Str string

// Bytes is a Python bytes object.
type Bytes []byte

// List is a Python list.
type List []Value

// Tuple is a Python tuple.
type Tuple []Value

// Dict is a Python dict. Python dicts keep insertion order, and so does
// Dict: items are written in slice order, which keeps output deterministic
// (a Go map would not). Keys must be hashable in Python: not a List or a
// Dict, nor a Tuple containing one.
type Dict []Item

// Item is one key/value pair of a Dict.
type Item struct {
	Key   Value
	Value Value
}

// Global is a reference to a module-level Python object, written with the
// GLOBAL opcode: a class, a function, or a singleton such as torch.float32
// (whose pickled form is the global itself).
type Global struct {
	Module string
	Name   string
}

// Call is the result of calling Func with Args (GLOBAL, argument tuple,
// REDUCE): how an instance is built from its constructor.
type Call struct {
	Func Global
	Args Tuple
}

// NewObj is cls.__new__(cls, *Args) (GLOBAL, argument tuple, NEWOBJ): how
// Python's pickle writes an instance whose __reduce_ex__(2) goes through
// copyreg.__newobj__, e.g. a namedtuple (its Args are its items).
type NewObj struct {
	Class Global
	Args  Tuple
}

// Object is an instance built as Python's pickle builds one from a
// __reduce__ result (callable, args, state, None, dict items): Func(*Args)
// (REDUCE), then each item set with SETITEM(S), then State, when not nil,
// applied with BUILD. An OrderedDict, or a subclass of it such as a
// Hugging Face ModelOutput, pickles this way.
type Object struct {
	Func  Global
	Args  Tuple
	Items Dict
	State Value
}

func (None) isValue()   {}
func (Bool) isValue()   {}
func (Int) isValue()    {}
func (Float) isValue()  {}
func (Str) isValue()    {}
func (Bytes) isValue()  {}
func (List) isValue()   {}
func (Tuple) isValue()  {}
func (Dict) isValue()   {}
func (Global) isValue() {}
func (Call) isValue()   {}
func (NewObj) isValue() {}
func (Object) isValue() {}

// D builds a Dict with string keys from alternating key, value arguments;
// it panics on an odd count or a non-string key, which is a programming
// error in the caller.
func D(kv ...any) Dict {
	if len(kv)%2 != 0 {
		panic("pickle.D: odd number of arguments")
	}
	d := make(Dict, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			panic("pickle.D: keys must be strings")
		}
		d = append(d, Item{Key: Str(k), Value: kv[i+1].(Value)})
	}
	return d
}
