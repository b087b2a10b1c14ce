// The thread a CAP feed is built on (capFeedOffThread in capFeedThread.ts): the feed's alerts and
// the names of their areas in, the Atom document out, then the thread ends.
import { parentPort, workerData } from 'node:worker_threads';
import { capFeed } from './cap.js';
import { namesOf, type CapFeedJob } from './capFeedThread.js';

const job = workerData as CapFeedJob;
parentPort!.postMessage(capFeed(job.feed, job.alerts, namesOf(job.names), job.nowMs, job.cancels));
