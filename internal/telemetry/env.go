package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// errEndpoint says what an OTLP/gRPC endpoint looks like.
var errEndpoint = errors.New("want a URL such as http://otel-collector:4317 (scheme http or https, a host, an optional port)")

// checkEndpoint accepts what the OTLP/gRPC exporter can dial: an http or
// https URL with a host and, if given, a numeric port. The SDK itself falls
// back to localhost:4317 on a value it cannot parse and dials
// "localhost:4317" (no scheme) as the URL scheme "localhost", so both would
// fail silently at run time; here they fail the start.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: %v", errEndpoint, errors.Unwrap(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return fmt.Errorf("%w: no scheme", errEndpoint)
	default:
		return fmt.Errorf("%w: scheme %q", errEndpoint, u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return fmt.Errorf("%w: no host", errEndpoint)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: port %q", errEndpoint, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%w: empty port", errEndpoint)
	}
	if u.User != nil {
		return fmt.Errorf("%w: user info is not sent; use OTEL_EXPORTER_OTLP_HEADERS", errEndpoint)
	}
	return nil
}

// samplerFromEnv builds the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the specification defines them (default
// parentbased_always_on). The SDK would read them too, but it ignores a
// value it does not know; the worker refuses it, and logs which sampler it
// uses.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(env("OTEL_TRACES_SAMPLER"))
	arg := env("OTEL_TRACES_SAMPLER_ARG")
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, &EnvError{Var: "OTEL_TRACES_SAMPLER_ARG", Value: arg, Err: errors.New("want a sampling ratio from 0 to 1")}
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, &EnvError{Var: "OTEL_TRACES_SAMPLER", Value: name, Err: errors.New("want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")}
}
