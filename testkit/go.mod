module github.com/wsfleet/wsfleet/testkit

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/rs/zerolog v1.35.1
	github.com/wsfleet/wsfleet/shared v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.29.0 // indirect
)

replace github.com/wsfleet/wsfleet/shared => ../shared
