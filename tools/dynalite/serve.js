// Runs dynalite's command line (node serve.js takes cli.js's flags), but
// keeps the server up when a client aborts a request while sending it:
// dynalite's request handler rethrows the stream's error ("aborted",
// ECONNRESET), and an uncaught exception ends the process. The fault
// matrix's clients cut such requests on purpose (an attempt timeout over a
// slow or sliced connection), and one cut took the server down, and every
// dynalite test after it (make test from a fresh clone, 2026-12-05: the
// bandwidth and slicer rows). Any other uncaught exception still ends it.
'use strict'

process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('dynalite: a request its client aborted: ' + err.message)
    return
  }
  console.error(err)
  process.exit(1)
})

require('./node_modules/dynalite/cli.js')
