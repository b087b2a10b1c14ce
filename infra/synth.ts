// Synthesizes the app into cdk.out/ without the cdk CLI, offline, with aws-cdk-lib only:
//   node dist/infra/synth.js [--output dir] [-c key=value ...]
// The templates it writes are what `cdk deploy` would deploy (the image is pulled from ECR,
// so nothing is built or uploaded).
import path from 'node:path';
import { App } from 'aws-cdk-lib';
import { defineApp } from './app.js';

function parseArgs(args: string[]): { outdir: string; context: Record<string, string> } {
  let outdir = 'cdk.out';
  const context: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === '--output' && value) outdir = value;
    else if ((flag === '-c' || flag === '--context') && value?.includes('=')) {
      const at = value.indexOf('=');
      context[value.slice(0, at)] = value.slice(at + 1);
    } else throw new Error(`usage: synth [--output dir] [-c key=value ...]; unexpected ${flag ?? ''} ${value ?? ''}`);
  }
  return { outdir, context };
}

const { outdir, context } = parseArgs(process.argv.slice(2));
const assembly = defineApp(new App({ outdir, context })).synth();
for (const stack of assembly.stacks) {
  process.stdout.write(`${stack.stackName}: ${path.relative(process.cwd(), stack.templateFullPath)}\n`);
}
