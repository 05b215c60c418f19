module dp.dev/dp/bench/bindings

go 1.19

require dp.dev/dp v0.0.0

replace dp.dev/dp => ../../../bindings/go
