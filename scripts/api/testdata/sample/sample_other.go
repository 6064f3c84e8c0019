//go:build !linux

package sample

// OnlyElsewhere is not read: the API is read as linux/amd64 builds it.
func OnlyElsewhere() {}
