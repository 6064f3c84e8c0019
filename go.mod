module github.com/numapool/numapool

go 1.26
