// Command metrics serves a pool's Stats as Prometheus metrics, through
// client_golang (/metrics) and through the OpenTelemetry SDK with its
// Prometheus exporter (/otel), while it runs a small workload:
//
//	go run . -addr :9464
//	curl -s localhost:9464/metrics | grep numapool_
//
// metrics.go is the part to paste into a service: NewCollector for
// client_golang, RegisterOTel for an OpenTelemetry meter and
// NewOTelProducer for its reader (the histograms). This is a module
// of its own, so that the library's go.mod does not grow.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/numapool/numapool/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	addr := flag.String("addr", "localhost:9464", "where to serve /metrics and /otel")
	flag.Parse()
	p, err := pool.New()
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	mux, shutdown, err := newMux(p)
	if err != nil {
		log.Fatal(err)
	}
	defer shutdown()
	go work(p)
	log.Printf("serving %s/metrics and %s/otel", *addr, *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// newMux serves p's Stats: /metrics through a client_golang registry,
// /otel through an OpenTelemetry meter provider and its Prometheus
// exporter (a registry of its own, since both use the same names).
func newMux(p *pool.Pool) (*http.ServeMux, func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(p))

	otelReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(otelReg), otelprom.WithProducer(NewOTelProducer(p, time.Now())))
	if err != nil {
		return nil, nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	registration, err := RegisterOTel(provider.Meter("github.com/numapool/numapool"), p)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/otel", promhttp.HandlerFor(otelReg, promhttp.HandlerOpts{}))
	return mux, func() {
		_ = registration.Unregister()
		_ = provider.Shutdown(context.Background())
	}, nil
}

// work keeps the pool busy with loops and small tasks.
func work(p *pool.Pool) {
	data := make([]float64, 1<<20)
	for {
		_ = p.ParallelFor(context.Background(), len(data), 0, func(_ *pool.Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				data[i] = data[i]*0.5 + 1
			}
			return nil
		})
		for range 1000 {
			_ = p.Submit(context.Background(), func(*pool.Worker) {})
		}
		time.Sleep(10 * time.Millisecond)
	}
}
