package telemetry_test

import (
	"context"
	"fmt"
	"os"

	"github.com/writeonce/wo/internal/telemetry"
)

// Setup reads the standard OTEL_* variables; a malformed endpoint is an
// error that names the variable and the value.
func ExampleSetup() {
	os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4317")
	defer os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, err := telemetry.Setup(context.Background(), telemetry.Options{})
	fmt.Println(err)

	os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tr, _ := telemetry.Setup(context.Background(), telemetry.Options{})
	fmt.Println(tr.Enabled, tr.Off)
	// Output:
	// telemetry: OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4317": want a URL such as http://otel-collector:4317 (scheme http or https, a host, an optional port): scheme "localhost"
	// false no OTEL_EXPORTER_OTLP_ENDPOINT
}
