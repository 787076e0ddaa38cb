// Starts dynalite (DynamoDB) bound to 127.0.0.1, surviving clients that
// abort a request. Usage: node dynalite.mjs PORT [DATA_DIR]
//
// dynalite 4.0.0's request handler does `req.on('error', err => { throw err })`:
// a client that resets its connection mid-request (a Go client whose context
// deadline fired while dynalite was busy) throws ECONNRESET "aborted" out of
// an event handler and kills the whole server. Real DynamoDB just drops that
// request. So here an uncaught client abort is logged and ignored; any other
// uncaught error still ends the process (exit 1).
import dynalite from "dynalite";

const port = Number(process.argv[2] || 4567);
const path = process.argv[3] || undefined;
const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });

const clientAbort = (err) => err && (err.code === "ECONNRESET" || err.code === "EPIPE" || err.message === "aborted");
process.on("uncaughtException", (err) => {
  if (clientAbort(err)) {
    console.error(`dynalite: a client aborted a request (${err.code || err.message}); ignored`);
    return;
  }
  console.error("dynalite: uncaught error:", err);
  process.exit(1);
});

server.listen(port, "127.0.0.1", () => {
  console.log(`Dynalite listening at: http://127.0.0.1:${server.address().port}`);
});
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
