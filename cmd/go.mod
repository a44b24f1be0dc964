module github.com/jitterretry/jitterretry/cmd

go 1.24

require github.com/jitterretry/jitterretry v0.0.0

replace github.com/jitterretry/jitterretry => ../
