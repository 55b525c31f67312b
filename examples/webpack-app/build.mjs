// `npm run build`: webpack's Node API (no webpack-cli needed), failing on any error.
import webpack from 'webpack';
import config from './webpack.config.js';

webpack(config, (err, stats) => {
  if (err || stats.hasErrors()) {
    console.error(err ?? stats.toString({ colors: false, all: false, errors: true }));
    process.exit(1);
  }
  console.log(stats.toString({ colors: false, assets: true, modules: false }));
});
