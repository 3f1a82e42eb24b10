package tuner_test

import (
	"testing"

	"github.com/tunefleet/tunefleet/internal/orttest"
)

func TestMain(m *testing.M) { orttest.Main(m) }

func needORT(t testing.TB) { orttest.Need(t) }
