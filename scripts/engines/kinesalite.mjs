// Starts kinesalite (Kinesis Data Streams) bound to 127.0.0.1.
// Usage: node kinesalite.mjs PORT
// Its CLI has no host flag and binds every interface, so we use its API.
// createStreamMs 0 makes a new stream ACTIVE at once (default: 500 ms).
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const kinesalite = require("kinesalite");
const port = Number(process.argv[2] || 4567);
const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 100 });
server.listen(port, "127.0.0.1", () => console.log(`kinesalite listening on http://127.0.0.1:${port}`));
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
