module github.com/numapool/numapool/obs_test

go 1.26.0

require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/numapool/numapool v0.0.0
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
)

require (
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/numapool/numapool => ../
