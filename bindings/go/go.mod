module dp.dev/dp

go 1.19
