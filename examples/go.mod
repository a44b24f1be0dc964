module github.com/jitterretry/jitterretry/examples

go 1.26

require github.com/jitterretry/jitterretry v0.0.0

replace github.com/jitterretry/jitterretry => ../
