// A validation thread of an import (validationPool.ts): NDJSON lines in, validated records and
// rejects out (validateRecords.ts), with the import's boundaries and partner.
import { parentPort, workerData } from 'node:worker_threads';
import { PlaceNames } from '../boundaries/placeNames.js';
import { Tagger } from '../boundaries/tagger.js';
import { validateLineBatch, type ValidationContext } from './validateRecords.js';
import type { ValidationReply, ValidationRequest, ValidationWorkerData } from './validationPool.js';

const port = parentPort!;
const { levels, places, partner } = workerData as ValidationWorkerData;
const ctx: ValidationContext = { tagger: new Tagger(levels), placeNames: new PlaceNames(places), partner };

port.on('message', ({ id, lines, ends }: ValidationRequest) => {
  let reply: ValidationReply;
  try {
    reply = { id, batch: validateLineBatch(Buffer.from(lines.buffer, lines.byteOffset, lines.byteLength), ends, ctx) };
  } catch (err) {
    // Not a bad record (those are rejects): a fault here, which stops the import.
    reply = { id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  port.postMessage(reply);
});
