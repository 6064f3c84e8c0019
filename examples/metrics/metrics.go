package main

import (
	"context"
	"strconv"
	"time"

	"github.com/numapool/numapool/pool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The pool's Stats as metrics, per node. The names follow OpenTelemetry's
// conventions (dotted, a unit beside the name); Prometheus gets the same
// names with underscores, _total on counters and _seconds on durations,
// as OpenTelemetry's Prometheus exporter would write them.
//
// Each scrape or collection takes one pool.Stats: it walks the workers'
// published counters, a few hundred loads for a large pool, and takes no
// lock that a worker takes.

// counter is one per-node counter of pool.NodeStats.
type counter struct {
	name, help string
	value      func(pool.NodeStats) uint64
}

var counters = []counter{
	{"numapool.tasks.submitted", "Tasks accepted from outside the pool plus those queued from inside tasks.", func(n pool.NodeStats) uint64 { return n.Submitted }},
	{"numapool.tasks.run", "Tasks started on the node's workers.", func(n pool.NodeStats) uint64 { return n.TasksRun }},
	{"numapool.tasks.completed", "Tasks finished on the node's workers, panicked or not.", func(n pool.NodeStats) uint64 { return n.Completed }},
	{"numapool.tasks.panicked", "Tasks whose function panicked.", func(n pool.NodeStats) uint64 { return n.Panicked }},
	{"numapool.tasks.spawned", "Tasks made inside tasks.", func(n pool.NodeStats) uint64 { return n.Spawned }},
	{"numapool.tasks.sent_home", "Tasks sent back to their node.", func(n pool.NodeStats) uint64 { return n.SentHome }},
	{"numapool.steals.in_node", "Steals from workers of the same node.", func(n pool.NodeStats) uint64 { return n.StealsInNode }},
	{"numapool.steals.cross_node", "Steals from other nodes' workers whose first task ran here.", func(n pool.NodeStats) uint64 { return n.StealsCrossNode }},
	{"numapool.tasks.stolen_cross_node", "Tasks moved by cross-node steals.", func(n pool.NodeStats) uint64 { return n.TasksStolenCrossNode }},
	{"numapool.inject.pulls_cross_node", "Batches taken from other nodes' shards whose first task ran here.", func(n pool.NodeStats) uint64 { return n.InjectPullsCrossNode }},
	{"numapool.workers.parks", "Times the node's workers slept.", func(n pool.NodeStats) uint64 { return n.Parks }},
	{"numapool.queue.overflows", "Full run queues that moved half to the node's shard.", func(n pool.NodeStats) uint64 { return n.Overflows }},
	{"numapool.tasks.blocks", "Worker.Block calls that handed the worker's seat to a spare thread.", func(n pool.NodeStats) uint64 { return n.Blocks }},
	{"numapool.spares.started", "Spare threads started for Worker.Block.", func(n pool.NodeStats) uint64 { return n.SparesStarted }},
	{"numapool.spares.refused", "Worker.Block calls that ran with no spare: the node's cap was reached.", func(n pool.NodeStats) uint64 { return n.SparesRefused }},
	{"numapool.stand_ins.started", "Workers started to stand in for workers whose tasks blocked without Worker.Block.", func(n pool.NodeStats) uint64 { return n.StandInsStarted }},
	{"numapool.stand_ins.refused", "Stand-ins the block watch wanted beyond the node's reserve.", func(n pool.NodeStats) uint64 { return n.StandInsRefused }},
}

// gauge is one per-node reading of pool.NodeStats.
type gauge struct {
	name, help string
	value      func(pool.NodeStats) int64
}

var gauges = []gauge{
	{"numapool.tasks.queued", "Tasks waiting to start on the node now: in its shards and its workers' queues.", func(n pool.NodeStats) int64 { return int64(n.Queued) }},
	{"numapool.workers.busy", "The node's workers in a task now.", func(n pool.NodeStats) int64 { return int64(n.BusyWorkers) }},
	{"numapool.workers", "The node's workers.", func(n pool.NodeStats) int64 { return int64(n.Workers) }},
	{"numapool.tasks.blocked", "Tasks in Worker.Block now, or back from it and waiting for their worker's seat.", func(n pool.NodeStats) int64 { return int64(n.Blocked) }},
	{"numapool.spares", "Spare threads alive.", func(n pool.NodeStats) int64 { return int64(n.Spares) }},
	{"numapool.spares.parked", "Spare threads parked.", func(n pool.NodeStats) int64 { return int64(n.SparesParked) }},
	{"numapool.stand_ins", "Workers standing in now for workers whose tasks blocked without Worker.Block.", func(n pool.NodeStats) int64 { return int64(n.StandIns) }},
	{"numapool.node.stuck", "1 while every worker of the node has been blocked in a task for seconds with work queued.", func(n pool.NodeStats) int64 { return b2i(n.Stuck) }},
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// histogram is one per-node histogram of pool.NodeStats.
type histogram struct {
	name, help string
	value      func(pool.NodeStats) pool.Histogram
}

var histograms = []histogram{
	{"numapool.task.queue_wait", "Time sampled tasks waited from submission to start.", func(n pool.NodeStats) pool.Histogram { return n.QueueWait }},
	{"numapool.task.run_time", "Time sampled tasks ran.", func(n pool.NodeStats) pool.Histogram { return n.RunTime }},
}

// promName is the Prometheus name of an OpenTelemetry-style name.
func promName(name, suffix string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b) + suffix
}

// Collector exports a pool's Stats to Prometheus:
// prometheus.MustRegister(NewCollector(p)).
type Collector struct {
	p          *pool.Pool
	counters   []*prometheus.Desc
	gauges     []*prometheus.Desc
	histograms []*prometheus.Desc
}

// NewCollector returns a Collector of p's Stats.
func NewCollector(p *pool.Pool) *Collector {
	c := &Collector{p: p}
	node := []string{"node"}
	for _, m := range counters {
		c.counters = append(c.counters, prometheus.NewDesc(promName(m.name, "_total"), m.help, node, nil))
	}
	for _, m := range gauges {
		c.gauges = append(c.gauges, prometheus.NewDesc(promName(m.name, ""), m.help, node, nil))
	}
	for _, m := range histograms {
		c.histograms = append(c.histograms, prometheus.NewDesc(promName(m.name, "_seconds"), m.help, node, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, ds := range [][]*prometheus.Desc{c.counters, c.gauges, c.histograms} {
		for _, d := range ds {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.p.Stats().Nodes {
		node := strconv.Itoa(n.Node)
		for i, m := range counters {
			ch <- prometheus.MustNewConstMetric(c.counters[i], prometheus.CounterValue, float64(m.value(n)), node)
		}
		for i, m := range gauges {
			ch <- prometheus.MustNewConstMetric(c.gauges[i], prometheus.GaugeValue, float64(m.value(n)), node)
		}
		for i, m := range histograms {
			count, sum, buckets := promHistogram(m.value(n))
			ch <- prometheus.MustNewConstHistogram(c.histograms[i], count, sum, buckets, node)
		}
	}
}

// promHistogram turns a pool.Histogram (lower bounds, a count per bucket)
// into Prometheus' form: cumulative counts by upper bound, the last
// bucket being +Inf, which Prometheus adds itself.
func promHistogram(h pool.Histogram) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.Counts))
	var cum uint64
	for i := 0; i+1 < len(h.Counts); i++ {
		cum += h.Counts[i]
		buckets[h.Buckets[i+1]] = cum
	}
	return h.Count, h.Sum, buckets
}

// RegisterOTel exports p's counters and gauges as OpenTelemetry
// asynchronous instruments of meter, observed at each collection, with
// the node as the attribute numapool.node. The histograms are not among
// them: OpenTelemetry's metrics API has no asynchronous histogram, and a
// reader takes them from NewOTelProducer instead. Unregister the returned
// registration when the pool closes.
func RegisterOTel(meter metric.Meter, p *pool.Pool) (metric.Registration, error) {
	var observables []metric.Observable
	cs := make([]metric.Int64ObservableCounter, len(counters))
	for i, m := range counters {
		inst, err := meter.Int64ObservableCounter(m.name, metric.WithDescription(m.help), metric.WithUnit("{event}"))
		if err != nil {
			return nil, err
		}
		cs[i] = inst
		observables = append(observables, inst)
	}
	gs := make([]metric.Int64ObservableGauge, len(gauges))
	for i, m := range gauges {
		inst, err := meter.Int64ObservableGauge(m.name, metric.WithDescription(m.help))
		if err != nil {
			return nil, err
		}
		gs[i] = inst
		observables = append(observables, inst)
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, n := range p.Stats().Nodes {
			attrs := metric.WithAttributes(attribute.Int("numapool.node", n.Node))
			for i, m := range counters {
				o.ObserveInt64(cs[i], int64(m.value(n)), attrs)
			}
			for i, m := range gauges {
				o.ObserveInt64(gs[i], m.value(n), attrs)
			}
		}
		return nil
	}, observables...)
}

// NewOTelProducer returns an OpenTelemetry metric producer of p's
// per-node histograms (queue wait and run time of the sampled tasks) as
// explicit-bucket histograms in seconds, cumulative since start, with the
// node as the attribute numapool.node. Give it to a reader
// (sdkmetric.WithProducer, or the Prometheus exporter's WithProducer):
// the metrics API has no asynchronous histogram to observe them with.
// A pool.Histogram's bucket holds its lower bound and OpenTelemetry's its
// upper one, so a sample exactly on a bound is counted one bucket lower
// here.
func NewOTelProducer(p *pool.Pool, start time.Time) sdkmetric.Producer {
	return otelHistograms{p: p, start: start}
}

type otelHistograms struct {
	p     *pool.Pool
	start time.Time
}

func (h otelHistograms) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	nodes := h.p.Stats().Nodes
	metrics := make([]metricdata.Metrics, 0, len(histograms))
	for _, m := range histograms {
		var points []metricdata.HistogramDataPoint[float64]
		for _, n := range nodes {
			hist := m.value(n)
			if len(hist.Counts) == 0 {
				continue
			}
			points = append(points, metricdata.HistogramDataPoint[float64]{
				Attributes:   attribute.NewSet(attribute.Int("numapool.node", n.Node)),
				StartTime:    h.start,
				Time:         now,
				Count:        hist.Count,
				Bounds:       hist.Buckets[1:], // upper bounds; the last bucket is +Inf
				BucketCounts: hist.Counts,
				Sum:          hist.Sum,
			})
		}
		metrics = append(metrics, metricdata.Metrics{
			Name:        m.name,
			Description: m.help,
			Unit:        "s",
			Data:        metricdata.Histogram[float64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality},
		})
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: "github.com/numapool/numapool"}, Metrics: metrics}}, nil
}
