// Command streamer is the wsfleet worker (work in progress).
package main

func main() {}
