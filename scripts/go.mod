module github.com/wsfleet/wsfleet/scripts

go 1.26.0

require github.com/wsfleet/wsfleet/shared v0.0.0

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
)

replace github.com/wsfleet/wsfleet/shared => ../shared
