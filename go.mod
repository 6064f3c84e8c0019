module github.com/numapool/numapool

go 1.26.0

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/anishathalye/porcupine v1.3.1
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/panjf2000/ants/v2 v2.12.1
	github.com/shirou/gopsutil/v3 v3.24.5
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.11.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/lufia/plan9stats v0.0.0-20211012122336-39d0f177ccd0 // indirect
	github.com/power-devops/perfstat v0.0.0-20210106213030-5aafc221ea8c // indirect
	github.com/shoenig/go-m1cpu v0.1.6 // indirect
	github.com/tklauser/go-sysconf v0.3.12 // indirect
	github.com/tklauser/numcpus v0.6.1 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
)
