// Starts fauxqs (SQS) bound to 127.0.0.1. Usage: node fauxqs.mjs PORT
// The fauxqs CLI binds 0.0.0.0, so we use its buildApp API instead.
import { buildApp } from "fauxqs";

const port = Number(process.argv[2] || 9324);
const app = buildApp({ logger: false, host: "localhost", defaultRegion: process.env.AWS_REGION || "us-east-1" });
await app.listen({ port, host: "127.0.0.1" });
console.log(`fauxqs listening on http://127.0.0.1:${port}`);
const stop = async () => {
  try { await app.close(); } finally { process.exit(0); }
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
